"""The near-duplicate threshold shared by the stages: the crawl rejects a new image this close to an
accepted one (``crawl.config.DEFAULT_PHASH_THRESHOLD``), and the probe keeps images this close on
one side of every train/test split (``probe.duplicates``). Here so neither stage imports the other.
"""

# Perceptual-hash Hamming distance (of 64 bits) at or below which two images are near
# duplicates. Measured on the 31 photographs that scikit-image, scikit-learn and matplotlib
# ship: resizing to 1/2 or 1/4 and re-encoding as JPEG (quality 90/75/50) moved a photo's
# pHash by 0-6 bits; two different photographs were 20 bits apart or more (1st percentile 20,
# median 32), except a stereo pair of the same motorcycle (4: a near duplicate indeed).
# 8 leaves a margin on both sides. A synthetic chessboard moved 15 bits (aliasing): such
# graphics may escape near-duplicate detection, which only costs a redundant image.
NEAR_DUPLICATE_DISTANCE = 8
