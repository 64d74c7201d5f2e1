"""classify's --out marker (hostile campaign): a FIFO put in its place hung classify; now it is no marker."""
import os
import time


def test_a_fifo_at_classifys_out_marker_is_no_marker(tmp_path):
    from classify.targets import OUT_MARKER_NAME, _read_out_marker
    from core.parts import PredictionParts

    parts = PredictionParts(tmp_path / ".p.csv.parts")
    parts.folder.mkdir()
    os.mkfifo(parts.folder / OUT_MARKER_NAME)
    start = time.perf_counter()
    assert _read_out_marker(parts) is None
    assert time.perf_counter() - start < 2
