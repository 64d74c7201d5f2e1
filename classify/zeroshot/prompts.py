"""Prompts by wnid (issue 14, ELEVATER): the text a zero-shot model's text tower sees for each class.

Every prompt is built from the wnid, never from a class-name string looked up in WordNet:
n02127052 is lynx.n.02 ("short-tailed wildcats with usually tufted ears; valued for their fur"),
never lynx.n.01's "a text browser" that ELEVATER's ImageNet-1k knowledge file took from the first
sense of the string 'lynx' (it has no WordNet definition or path for 537 of the 1000 classes);
n02123159 is tiger_cat.n.02 ("a cat having a striped coat"), not the wild tiger cat n02126465.

A :class:`Recipe` says how:

* ``names``: ``wordnet`` (default): each synset's first lemma ('lynx', 'tiger cat'); where two
  classes of the same label set share it (ImageNet-1k's two 'crane's and two 'maillot's, 3,186
  classes of ImageNet-21k) each gets its first hypernym (as for ``path``) in brackets ('crane (wading bird)',
  'crane (lifting device)'), and the synset name where that is still shared. ``openai``: the
  names OpenAI curated for CLIP (``OPENAI_IMAGENET_CLASSNAMES``, as open_clip ships them) mapped to
  wnids through the ImageNet-1k class order (``core.labels``), kept verbatim (their two 'missile's
  and two 'sunglasses' included: OpenAI's own choice); a wnid outside ImageNet-1k gets its WordNet
  name (``coverage`` counts how many classes have an OpenAI name).
* ``knowledge``: ``name`` (default: none, the class name alone, as CLIP), ``def`` (the synset's
  WordNet definition), ``path`` (the hypernym chain: the class, its first hypernym, that one's
  first hypernym… up to entity.n.01 (of several hypernyms, the deepest, then by name: NLTK 3.10's own
  order changes between processes), as ELEVATER's WordNet hierarchy knowledge, of which a prompt
  uses the first two hypernyms, ``PATH_HYPERNYMS``), ``def+path``, or ``file``: a user file
  (``knowledge_file``, TSV ``wnid<TAB>text``, one line per wnid) for Wiktionary or LLM-written
  knowledge. A class without knowledge of the asked kind (entity.n.01 has no hypernym, a file may
  skip a wnid) gets the templates alone, as in ELEVATER.
* ``templates``: ``openai80`` (default: OpenAI's 80 ImageNet templates), ``simple7`` (the 7 of
  them OpenAI's notebook selected), or a text file, one template a line with ``{}`` where the
  name goes (blank lines and ``#`` comments skipped).
* ``style`` (only matters with knowledge): ``plain`` (default), a sentence:
  "a bad photo of a lynx, short-tailed wildcats with usually tufted ears; valued for their fur."
  (path: "…, a kind of wildcat, a kind of cat.", def+path: "…, a kind of wildcat, a kind of cat:
  short-tailed …"); ``elevater``, ELEVATER's exact format (``vision_benchmark/evaluation/feature.py``,
  ``extract_text_features``): the filled template, then ``' ' + ' '.join(word_tokenize(' ; NAME , '
  + KNOWLEDGE))``: "a bad photo of a lynx. ; lynx , short-tailed wildcats with usually tufted ears ;
  valued for their fur", the path knowledge being ``' '.join(path[:3])`` of lemma names with
  underscores ("lynx wildcat cat"). Two differences, both stated: NLTK's ``word_tokenize`` runs
  with ``preserve_line=True`` (Punkt's sentence model is not installed offline; WordNet glosses are
  one sentence), and ``def+path`` appends both knowledge items to one prompt (ELEVATER's hierarchy
  option replaces the definition; with several items it encodes one prompt per item and template).

Why plain is the default: the default recipe has no knowledge, and there both styles give the
very prompts open_clip builds (template filled with the name); with knowledge, the plain sentence
is what a caption looks like (CLIP's text tower was trained on captions, not on ELEVATER's
tokenised ' ; name , ' strings, which K-LITE-style models were pre-trained with) and what a person
can read in ``python -m classify prompts``. No CLIP weights install offline, so neither style's
accuracy was measured here; ``python -m classify prompts`` and the recipe tag (below) make the two
easy to compare side by side on a machine with weights.

The recipe is part of the model id (``Recipe.tag``): "" for the default recipe, else tokens each
after ``RECIPE_SEPARATOR``: ``openai-names``, ``def``, ``path``, ``kf-<sha8>`` (a knowledge file),
``simple7``, ``tf-<sha8>`` (a template file), ``elevater``. The separator is ``__``, not ``+``:
a model id names a folder and may hold only letters, digits, ``_ . -`` (``core.parts``), so
``clip-ViT-B-32.openai__def__path``; ``Recipe.parse`` also reads ``+def+path``. A knowledge or
template file is copied, when first used, to ``$WILDLENS_HOME/cache/prompts/`` under its hash, so
a tag read back later names a file that is still there.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import OptionError
from core.labels import checked_wnids, get_label_space
from core.wordgraph import noun_of as synset_of  # NLTK's nouns as arrays (core.wordgraph)
from core.wordnet import is_wnid

# OpenAI's prompt templates and curated ImageNet-1k class names, copied as text from open_clip
# (github.com/mlfoundations/open_clip, src/open_clip/zero_shot_metadata.py: OPENAI_IMAGENET_TEMPLATES,
# SIMPLE_IMAGENET_TEMPLATES, IMAGENET_CLASSNAMES; commit 89fb801f1e60), which took them from OpenAI's
# CLIP notebook Prompt_Engineering_for_ImageNet.ipynb. Each template holds one '{}' for the name.
_OPENAI80 = (
    "a bad photo of a {}.", "a photo of many {}.", "a sculpture of a {}.",
    "a photo of the hard to see {}.", "a low resolution photo of the {}.", "a rendering of a {}.",
    "graffiti of a {}.", "a bad photo of the {}.", "a cropped photo of the {}.",
    "a tattoo of a {}.", "the embroidered {}.", "a photo of a hard to see {}.",
    "a bright photo of a {}.", "a photo of a clean {}.", "a photo of a dirty {}.",
    "a dark photo of the {}.", "a drawing of a {}.", "a photo of my {}.", "the plastic {}.",
    "a photo of the cool {}.", "a close-up photo of a {}.", "a black and white photo of the {}.",
    "a painting of the {}.", "a painting of a {}.", "a pixelated photo of the {}.",
    "a sculpture of the {}.", "a bright photo of the {}.", "a cropped photo of a {}.",
    "a plastic {}.", "a photo of the dirty {}.", "a jpeg corrupted photo of a {}.",
    "a blurry photo of the {}.", "a photo of the {}.", "a good photo of the {}.",
    "a rendering of the {}.", "a {} in a video game.", "a photo of one {}.", "a doodle of a {}.",
    "a close-up photo of the {}.", "a photo of a {}.", "the origami {}.", "the {} in a video game.",
    "a sketch of a {}.", "a doodle of the {}.", "a origami {}.", "a low resolution photo of a {}.",
    "the toy {}.", "a rendition of the {}.", "a photo of the clean {}.", "a photo of a large {}.",
    "a rendition of a {}.", "a photo of a nice {}.", "a photo of a weird {}.",
    "a blurry photo of a {}.", "a cartoon {}.", "art of a {}.", "a sketch of the {}.",
    "a embroidered {}.", "a pixelated photo of a {}.", "itap of the {}.",
    "a jpeg corrupted photo of the {}.", "a good photo of a {}.", "a plushie {}.",
    "a photo of the nice {}.", "a photo of the small {}.", "a photo of the weird {}.",
    "the cartoon {}.", "art of the {}.", "a drawing of the {}.", "a photo of the large {}.",
    "a black and white photo of a {}.", "the plushie {}.", "a dark photo of a {}.", "itap of a {}.",
    "graffiti of the {}.", "a toy {}.", "itap of my {}.", "a photo of a cool {}.",
    "a photo of a small {}.", "a tattoo of the {}.",
)

_SIMPLE7 = (
    "itap of a {}.", "a bad photo of the {}.", "a origami {}.", "a photo of the large {}.",
    "a {} in a video game.", "art of the {}.", "a photo of the small {}.",
)

OPENAI_IMAGENET_CLASSNAMES = (
    "tench", "goldfish", "great white shark", "tiger shark", "hammerhead shark", "electric ray",
    "stingray", "rooster", "hen", "ostrich", "brambling", "goldfinch", "house finch", "junco",
    "indigo bunting", "American robin", "bulbul", "jay", "magpie", "chickadee", "American dipper",
    "kite (bird of prey)", "bald eagle", "vulture", "great grey owl", "fire salamander",
    "smooth newt", "newt", "spotted salamander", "axolotl", "American bullfrog", "tree frog",
    "tailed frog", "loggerhead sea turtle", "leatherback sea turtle", "mud turtle", "terrapin",
    "box turtle", "banded gecko", "green iguana", "Carolina anole",
    "desert grassland whiptail lizard", "agama", "frilled-necked lizard", "alligator lizard",
    "Gila monster", "European green lizard", "chameleon", "Komodo dragon", "Nile crocodile",
    "American alligator", "triceratops", "worm snake", "ring-necked snake",
    "eastern hog-nosed snake", "smooth green snake", "kingsnake", "garter snake", "water snake",
    "vine snake", "night snake", "boa constrictor", "African rock python", "Indian cobra",
    "green mamba", "sea snake", "Saharan horned viper", "eastern diamondback rattlesnake",
    "sidewinder rattlesnake", "trilobite", "harvestman", "scorpion", "yellow garden spider",
    "barn spider", "European garden spider", "southern black widow", "tarantula", "wolf spider",
    "tick", "centipede", "black grouse", "ptarmigan", "ruffed grouse", "prairie grouse", "peafowl",
    "quail", "partridge", "african grey parrot", "macaw", "sulphur-crested cockatoo", "lorikeet",
    "coucal", "bee eater", "hornbill", "hummingbird", "jacamar", "toucan", "duck",
    "red-breasted merganser", "goose", "black swan", "tusker", "echidna", "platypus", "wallaby",
    "koala", "wombat", "jellyfish", "sea anemone", "brain coral", "flatworm", "nematode", "conch",
    "snail", "slug", "sea slug", "chiton", "chambered nautilus", "Dungeness crab", "rock crab",
    "fiddler crab", "red king crab", "American lobster", "spiny lobster", "crayfish", "hermit crab",
    "isopod", "white stork", "black stork", "spoonbill", "flamingo", "little blue heron",
    "great egret", "bittern bird", "crane bird", "limpkin", "common gallinule", "American coot",
    "bustard", "ruddy turnstone", "dunlin", "common redshank", "dowitcher", "oystercatcher",
    "pelican", "king penguin", "albatross", "grey whale", "killer whale", "dugong", "sea lion",
    "Chihuahua", "Japanese Chin", "Maltese", "Pekingese", "Shih Tzu", "King Charles Spaniel",
    "Papillon", "toy terrier", "Rhodesian Ridgeback", "Afghan Hound", "Basset Hound", "Beagle",
    "Bloodhound", "Bluetick Coonhound", "Black and Tan Coonhound", "Treeing Walker Coonhound",
    "English foxhound", "Redbone Coonhound", "borzoi", "Irish Wolfhound", "Italian Greyhound",
    "Whippet", "Ibizan Hound", "Norwegian Elkhound", "Otterhound", "Saluki", "Scottish Deerhound",
    "Weimaraner", "Staffordshire Bull Terrier", "American Staffordshire Terrier",
    "Bedlington Terrier", "Border Terrier", "Kerry Blue Terrier", "Irish Terrier",
    "Norfolk Terrier", "Norwich Terrier", "Yorkshire Terrier", "Wire Fox Terrier",
    "Lakeland Terrier", "Sealyham Terrier", "Airedale Terrier", "Cairn Terrier",
    "Australian Terrier", "Dandie Dinmont Terrier", "Boston Terrier", "Miniature Schnauzer",
    "Giant Schnauzer", "Standard Schnauzer", "Scottish Terrier", "Tibetan Terrier",
    "Australian Silky Terrier", "Soft-coated Wheaten Terrier", "West Highland White Terrier",
    "Lhasa Apso", "Flat-Coated Retriever", "Curly-coated Retriever", "Golden Retriever",
    "Labrador Retriever", "Chesapeake Bay Retriever", "German Shorthaired Pointer", "Vizsla",
    "English Setter", "Irish Setter", "Gordon Setter", "Brittany dog", "Clumber Spaniel",
    "English Springer Spaniel", "Welsh Springer Spaniel", "Cocker Spaniel", "Sussex Spaniel",
    "Irish Water Spaniel", "Kuvasz", "Schipperke", "Groenendael dog", "Malinois", "Briard",
    "Australian Kelpie", "Komondor", "Old English Sheepdog", "Shetland Sheepdog", "collie",
    "Border Collie", "Bouvier des Flandres dog", "Rottweiler", "German Shepherd Dog", "Dobermann",
    "Miniature Pinscher", "Greater Swiss Mountain Dog", "Bernese Mountain Dog",
    "Appenzeller Sennenhund", "Entlebucher Sennenhund", "Boxer", "Bullmastiff", "Tibetan Mastiff",
    "French Bulldog", "Great Dane", "St. Bernard", "husky", "Alaskan Malamute", "Siberian Husky",
    "Dalmatian", "Affenpinscher", "Basenji", "pug", "Leonberger", "Newfoundland dog",
    "Great Pyrenees dog", "Samoyed", "Pomeranian", "Chow Chow", "Keeshond", "brussels griffon",
    "Pembroke Welsh Corgi", "Cardigan Welsh Corgi", "Toy Poodle", "Miniature Poodle",
    "Standard Poodle", "Mexican hairless dog (xoloitzcuintli)", "grey wolf", "Alaskan tundra wolf",
    "red wolf or maned wolf", "coyote", "dingo", "dhole", "African wild dog", "hyena", "red fox",
    "kit fox", "Arctic fox", "grey fox", "tabby cat", "tiger cat", "Persian cat", "Siamese cat",
    "Egyptian Mau", "cougar", "lynx", "leopard", "snow leopard", "jaguar", "lion", "tiger",
    "cheetah", "brown bear", "American black bear", "polar bear", "sloth bear", "mongoose",
    "meerkat", "tiger beetle", "ladybug", "ground beetle", "longhorn beetle", "leaf beetle",
    "dung beetle", "rhinoceros beetle", "weevil", "fly", "bee", "ant", "grasshopper",
    "cricket insect", "stick insect", "cockroach", "praying mantis", "cicada", "leafhopper",
    "lacewing", "dragonfly", "damselfly", "red admiral butterfly", "ringlet butterfly",
    "monarch butterfly", "small white butterfly", "sulphur butterfly", "gossamer-winged butterfly",
    "starfish", "sea urchin", "sea cucumber", "cottontail rabbit", "hare", "Angora rabbit",
    "hamster", "porcupine", "fox squirrel", "marmot", "beaver", "guinea pig", "common sorrel horse",
    "zebra", "pig", "wild boar", "warthog", "hippopotamus", "ox", "water buffalo", "bison",
    "ram (adult male sheep)", "bighorn sheep", "Alpine ibex", "hartebeest", "impala (antelope)",
    "gazelle", "arabian camel", "llama", "weasel", "mink", "European polecat",
    "black-footed ferret", "otter", "skunk", "badger", "armadillo", "three-toed sloth", "orangutan",
    "gorilla", "chimpanzee", "gibbon", "siamang", "guenon", "patas monkey", "baboon", "macaque",
    "langur", "black-and-white colobus", "proboscis monkey", "marmoset", "white-headed capuchin",
    "howler monkey", "titi monkey", "Geoffroy's spider monkey", "common squirrel monkey",
    "ring-tailed lemur", "indri", "Asian elephant", "African bush elephant", "red panda",
    "giant panda", "snoek fish", "eel", "silver salmon", "rock beauty fish", "clownfish",
    "sturgeon", "gar fish", "lionfish", "pufferfish", "abacus", "abaya", "academic gown",
    "accordion", "acoustic guitar", "aircraft carrier", "airliner", "airship", "altar", "ambulance",
    "amphibious vehicle", "analog clock", "apiary", "apron", "trash can", "assault rifle",
    "backpack", "bakery", "balance beam", "balloon", "ballpoint pen", "Band-Aid", "banjo",
    "baluster / handrail", "barbell", "barber chair", "barbershop", "barn", "barometer", "barrel",
    "wheelbarrow", "baseball", "basketball", "bassinet", "bassoon", "swimming cap", "bath towel",
    "bathtub", "station wagon", "lighthouse", "beaker", "military hat (bearskin or shako)",
    "beer bottle", "beer glass", "bell tower", "baby bib", "tandem bicycle", "bikini",
    "ring binder", "binoculars", "birdhouse", "boathouse", "bobsleigh", "bolo tie", "poke bonnet",
    "bookcase", "bookstore", "bottle cap", "hunting bow", "bow tie", "brass memorial plaque", "bra",
    "breakwater", "breastplate", "broom", "bucket", "buckle", "bulletproof vest",
    "high-speed train", "butcher shop", "taxicab", "cauldron", "candle", "cannon", "canoe",
    "can opener", "cardigan", "car mirror", "carousel", "tool kit", "cardboard box / carton",
    "car wheel", "automated teller machine", "cassette", "cassette player", "castle", "catamaran",
    "CD player", "cello", "mobile phone", "chain", "chain-link fence", "chain mail", "chainsaw",
    "storage chest", "chiffonier", "bell or wind chime", "china cabinet", "Christmas stocking",
    "church", "movie theater", "cleaver", "cliff dwelling", "cloak", "clogs", "cocktail shaker",
    "coffee mug", "coffeemaker", "spiral or coil", "combination lock", "computer keyboard",
    "candy store", "container ship", "convertible", "corkscrew", "cornet", "cowboy boot",
    "cowboy hat", "cradle", "construction crane", "crash helmet", "crate", "infant bed",
    "Crock Pot", "croquet ball", "crutch", "cuirass", "dam", "desk", "desktop computer",
    "rotary dial telephone", "diaper", "digital clock", "digital watch", "dining table",
    "dishcloth", "dishwasher", "disc brake", "dock", "dog sled", "dome", "doormat", "drilling rig",
    "drum", "drumstick", "dumbbell", "Dutch oven", "electric fan", "electric guitar",
    "electric locomotive", "entertainment center", "envelope", "espresso machine", "face powder",
    "feather boa", "filing cabinet", "fireboat", "fire truck", "fire screen", "flagpole", "flute",
    "folding chair", "football helmet", "forklift", "fountain", "fountain pen", "four-poster bed",
    "freight car", "French horn", "frying pan", "fur coat", "garbage truck",
    "gas mask or respirator", "gas pump", "goblet", "go-kart", "golf ball", "golf cart", "gondola",
    "gong", "gown", "grand piano", "greenhouse", "radiator grille", "grocery store", "guillotine",
    "hair clip", "hair spray", "half-track", "hammer", "hamper", "hair dryer", "hand-held computer",
    "handkerchief", "hard disk drive", "harmonica", "harp", "combine harvester", "hatchet",
    "holster", "home theater", "honeycomb", "hook", "hoop skirt", "gymnastic horizontal bar",
    "horse-drawn vehicle", "hourglass", "iPod", "clothes iron", "carved pumpkin", "jeans", "jeep",
    "T-shirt", "jigsaw puzzle", "rickshaw", "joystick", "kimono", "knee pad", "knot", "lab coat",
    "ladle", "lampshade", "laptop computer", "lawn mower", "lens cap", "letter opener", "library",
    "lifeboat", "lighter", "limousine", "ocean liner", "lipstick", "slip-on shoe", "lotion",
    "music speaker", "loupe magnifying glass", "sawmill", "magnetic compass", "messenger bag",
    "mailbox", "tights", "one-piece bathing suit", "manhole cover", "maraca", "marimba", "mask",
    "matchstick", "maypole", "maze", "measuring cup", "medicine cabinet", "megalith", "microphone",
    "microwave oven", "military uniform", "milk can", "minibus", "miniskirt", "minivan", "missile",
    "mitten", "mixing bowl", "mobile home", "ford model t", "modem", "monastery", "monitor",
    "moped", "mortar and pestle", "graduation cap", "mosque", "mosquito net", "vespa",
    "mountain bike", "tent", "computer mouse", "mousetrap", "moving van", "muzzle", "metal nail",
    "neck brace", "necklace", "baby pacifier", "notebook computer", "obelisk", "oboe", "ocarina",
    "odometer", "oil filter", "pipe organ", "oscilloscope", "overskirt", "bullock cart",
    "oxygen mask", "product packet / packaging", "paddle", "paddle wheel", "padlock", "paintbrush",
    "pajamas", "palace", "pan flute", "paper towel", "parachute", "parallel bars", "park bench",
    "parking meter", "railroad car", "patio", "payphone", "pedestal", "pencil case",
    "pencil sharpener", "perfume", "Petri dish", "photocopier", "plectrum", "Pickelhaube",
    "picket fence", "pickup truck", "pier", "piggy bank", "pill bottle", "pillow", "ping-pong ball",
    "pinwheel", "pirate ship", "drink pitcher", "block plane", "planetarium", "plastic bag",
    "plate rack", "farm plow", "plunger", "Polaroid camera", "pole", "police van", "poncho",
    "pool table", "soda bottle", "plant pot", "potter's wheel", "power drill", "prayer rug",
    "printer", "prison", "missile", "projector", "hockey puck", "punching bag", "purse", "quill",
    "quilt", "race car", "racket", "radiator", "radio", "radio telescope", "rain barrel",
    "recreational vehicle", "fishing casting reel", "reflex camera", "refrigerator",
    "remote control", "restaurant", "revolver", "rifle", "rocking chair", "rotisserie", "eraser",
    "rugby ball", "ruler measuring stick", "sneaker", "safe", "safety pin", "salt shaker", "sandal",
    "sarong", "saxophone", "scabbard", "weighing scale", "school bus", "schooner", "scoreboard",
    "CRT monitor", "screw", "screwdriver", "seat belt", "sewing machine", "shield", "shoe store",
    "shoji screen / room divider", "shopping basket", "shopping cart", "shovel", "shower cap",
    "shower curtain", "ski", "balaclava ski mask", "sleeping bag", "slide rule", "sliding door",
    "slot machine", "snorkel", "snowmobile", "snowplow", "soap dispenser", "soccer ball", "sock",
    "solar thermal collector", "sombrero", "soup bowl", "keyboard space bar", "space heater",
    "space shuttle", "spatula", "motorboat", "spider web", "spindle", "sports car", "spotlight",
    "stage", "steam locomotive", "through arch bridge", "steel drum", "stethoscope", "scarf",
    "stone wall", "stopwatch", "stove", "strainer", "tram", "stretcher", "couch", "stupa",
    "submarine", "suit", "sundial", "sunglasses", "sunglasses", "sunscreen", "suspension bridge",
    "mop", "sweatshirt", "swim trunks / shorts", "swing", "electrical switch", "syringe",
    "table lamp", "tank", "tape player", "teapot", "teddy bear", "television", "tennis ball",
    "thatched roof", "front curtain", "thimble", "threshing machine", "throne", "tile roof",
    "toaster", "tobacco shop", "toilet seat", "torch", "totem pole", "tow truck", "toy store",
    "tractor", "semi-trailer truck", "tray", "trench coat", "tricycle", "trimaran", "tripod",
    "triumphal arch", "trolleybus", "trombone", "hot tub", "turnstile", "typewriter keyboard",
    "umbrella", "unicycle", "upright piano", "vacuum cleaner", "vase", "vaulted or arched ceiling",
    "velvet fabric", "vending machine", "vestment", "viaduct", "violin", "volleyball",
    "waffle iron", "wall clock", "wallet", "wardrobe", "military aircraft", "sink",
    "washing machine", "water bottle", "water jug", "water tower", "whiskey jug", "whistle",
    "hair wig", "window screen", "window shade", "Windsor tie", "wine bottle", "airplane wing",
    "wok", "wooden spoon", "wool", "split-rail fence", "shipwreck", "sailboat", "yurt", "website",
    "comic book", "crossword", "traffic or street sign", "traffic light", "dust jacket", "menu",
    "plate", "guacamole", "consomme", "hot pot", "trifle", "ice cream", "popsicle", "baguette",
    "bagel", "pretzel", "cheeseburger", "hot dog", "mashed potatoes", "cabbage", "broccoli",
    "cauliflower", "zucchini", "spaghetti squash", "acorn squash", "butternut squash", "cucumber",
    "artichoke", "bell pepper", "cardoon", "mushroom", "Granny Smith apple", "strawberry", "orange",
    "lemon", "fig", "pineapple", "banana", "jackfruit", "cherimoya (custard apple)", "pomegranate",
    "hay", "carbonara", "chocolate syrup", "dough", "meatloaf", "pizza", "pot pie", "burrito",
    "red wine", "espresso", "tea cup", "eggnog", "mountain", "bubble", "cliff", "coral reef",
    "geyser", "lakeshore", "promontory", "sandbar", "beach", "valley", "volcano", "baseball player",
    "bridegroom", "scuba diver", "rapeseed", "daisy", "yellow lady's slipper", "corn", "acorn",
    "rose hip", "horse chestnut seed", "coral fungus", "agaric", "gyromitra", "stinkhorn mushroom",
    "earth star fungus", "hen of the woods mushroom", "bolete", "corn cob", "toilet paper",
)

TEMPLATES: dict[str, tuple[str, ...]] = {"openai80": _OPENAI80, "simple7": _SIMPLE7}
NAMES = ("wordnet", "openai")
KNOWLEDGE = ("name", "def", "path", "def+path", "file")
STYLES = ("plain", "elevater")
PATH_HYPERNYMS = 2  # hypernyms a path prompt names (ELEVATER: path_wn[:3], the class and two above it)
RECIPE_SEPARATOR = "__"
PROMPT_CACHE = "prompts"  # under $WILDLENS_HOME/cache
_SHA8 = re.compile(r"^[0-9a-f]{8}$")


class PromptError(OptionError):
    """A recipe, template file or knowledge file that cannot be used; the message says the fix."""


# --------------------------------------------------------------------------- files of the user
def _sha8(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    except OSError as exc:
        raise PromptError(f"Cannot read {path}: {exc.strerror or exc}.") from None


def _cache_path(kind: str, sha8: str) -> Path:
    from core.runstore import default_root

    suffix = "tsv" if kind == "knowledge" else "txt"
    return default_root() / "cache" / PROMPT_CACHE / f"{kind}-{sha8}.{suffix}"


def _keep(kind: str, path: Path, data: bytes) -> None:
    """A copy of a user file in the cache under its hash (once), so a recipe tag stays resolvable."""
    from core.runstore import write_bytes_atomic

    target = _cache_path(kind, hashlib.sha256(data).hexdigest()[:8])
    if target.resolve() != path.resolve() and not target.is_file():
        try:
            write_bytes_atomic(target, data)
        except OSError:
            pass  # a read-only home: the prompts still work, only a later lookup by tag would not


def _not_a_file(path: Path, what: str, expected: str) -> str:
    """Why ``path`` is no such file, in one line: missing, or a folder, FIFO, socket or device (a FIFO
    was reported as 'does not exist'); never opened, so a FIFO cannot block."""
    import os

    from core.userfile import describe_kind

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return f"The {what} {path} does not exist (expected {expected})."
    return f"The {what} {path} is {describe_kind(mode)}, not a file (expected {expected})."


def _read_text(path: Path, what: str) -> tuple[str, bytes]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PromptError(f"The {what} {path} does not exist.") from None
    except OSError as exc:
        raise PromptError(f"Cannot read the {what} {path}: {exc.strerror or exc}.") from None
    try:
        # utf-8-sig: a byte order mark (Notepad's "UTF-8") is no text; it stayed in the first template
        # as an invisible U+FEFF in every class's prompt, and made a knowledge file's first wnid unknown.
        return data.decode("utf-8-sig"), data
    except UnicodeDecodeError:
        raise PromptError(f"The {what} {path} is not UTF-8 text.") from None


@functools.lru_cache(maxsize=32)
def _template_file(path: str, mtime_ns: int) -> tuple[str, ...]:
    text, data = _read_text(Path(path), "template file")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{}" not in line:
            raise PromptError(f"{path}, line {number}: {line!r} has no '{{}}' where the class name goes, "
                              "e.g. 'a photo of a {}.'.")
        out.append(line)
    if not out:
        raise PromptError(f"{path} has no template; write one a line with '{{}}' for the name, e.g. 'a photo of a {{}}.'.")
    _keep("templates", Path(path), data)
    return tuple(out)


def templates_of(templates: str) -> tuple[str, ...]:
    """The templates a recipe names: 'openai80', 'simple7' or a file of templates with '{}'."""
    if templates in TEMPLATES:
        return TEMPLATES[templates]
    path = Path(templates).expanduser()
    if path.exists() and not path.is_file():  # a FIFO, folder or device: named as what it is
        raise PromptError(_not_a_file(path, "template file", "one template a line, '{}' where the class name goes"))
    if not path.is_file():
        raise PromptError(f"Unknown templates {templates!r}: use {', '.join(TEMPLATES)} or a file with one template "
                          "a line, '{}' where the class name goes.")
    return _template_file(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _knowledge_file(path: str, mtime_ns: int) -> dict[str, str]:
    text, data = _read_text(Path(path), "knowledge file")
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        wnid, tab, knowledge = line.partition("\t")
        wnid, knowledge = wnid.strip(), " ".join(knowledge.split())
        if not tab or not is_wnid(wnid):
            # One f-string: .format() on a text holding the path broke on a path with braces ('k{1}.tsv').
            raise PromptError(f"{path}, line {number}: expected 'wnid<TAB>text' (e.g. 'n02127052\\tshort-tailed wildcat "
                              f"with tufted ears'), got {line[:60]!r}.")
        if not knowledge:
            raise PromptError(f"{path}, line {number}: {wnid} has no text after the tab.")
        if wnid in out:
            raise PromptError(f"{path}, line {number}: {wnid} again (first on line {first_line[wnid]}); "
                              "give one knowledge text per wnid.")
        out[wnid], first_line[wnid] = knowledge, number
    if not out:
        raise PromptError(f"{path} has no 'wnid<TAB>text' line.")
    _keep("knowledge", Path(path), data)
    return out


def read_knowledge_file(path) -> dict[str, str]:
    """wnid -> text of a knowledge TSV (``wnid<TAB>text``, one line per wnid; '#' lines skipped)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PromptError(_not_a_file(path, "knowledge file", "a TSV: wnid<TAB>text"))
    return _knowledge_file(str(path), path.stat().st_mtime_ns)


# --------------------------------------------------------------------------- the recipe
@dataclass(frozen=True)
class Recipe:
    """How a class's prompts are built; ``tag()`` is its part of the model id."""

    names: str = "wordnet"
    knowledge: str = "name"
    templates: str = "openai80"
    style: str = "plain"
    knowledge_file: str | None = None

    def __post_init__(self):
        knowledge = self.knowledge
        if self.knowledge_file is not None:
            if knowledge not in ("name", "file"):
                raise PromptError(f"--knowledge {knowledge} and --knowledge-file both given; a knowledge file replaces "
                                  "WordNet's knowledge: drop one of them.")
            object.__setattr__(self, "knowledge_file", str(self.knowledge_file))
            object.__setattr__(self, "knowledge", "file")
        elif knowledge == "file":
            raise PromptError("--knowledge file needs --knowledge-file TSV (lines 'wnid<TAB>text').")
        if self.names not in NAMES:
            raise PromptError(f"Unknown names {self.names!r}: use {' or '.join(NAMES)}.")
        if self.knowledge not in KNOWLEDGE:
            raise PromptError(f"Unknown knowledge {self.knowledge!r}: use {', '.join(k for k in KNOWLEDGE if k != 'file')} "
                              "or --knowledge-file TSV.")
        if self.style not in STYLES:
            raise PromptError(f"Unknown prompt style {self.style!r}: use {' or '.join(STYLES)}.")
        if not self.templates:
            raise PromptError(f"No templates: use {', '.join(TEMPLATES)} or a file of templates.")

    def tokens(self) -> list[str]:
        out = []
        if self.names == "openai":
            out.append("openai-names")
        if self.knowledge in ("def", "def+path"):
            out.append("def")
        if self.knowledge in ("path", "def+path"):
            out.append("path")
        if self.knowledge == "file":
            out.append(f"kf-{_sha8(Path(self.knowledge_file).expanduser())}")
        if self.templates == "simple7":
            out.append("simple7")
        elif self.templates not in TEMPLATES:
            out.append(f"tf-{_sha8(Path(self.templates).expanduser())}")
        if self.style == "elevater" and self.knowledge != "name":  # without knowledge both styles are the same
            out.append("elevater")
        return out

    def tag(self) -> str:
        """The model-id suffix: '' for the default recipe, else e.g. '__def', '__def__path__simple7'."""
        return "".join(RECIPE_SEPARATOR + token for token in self.tokens())

    @classmethod
    def parse(cls, tag: str) -> "Recipe":
        """The recipe of a tag (``tag()``'s inverse; '+' works as a separator too). A ``kf-``/``tf-``
        token names the copy kept in ``$WILDLENS_HOME/cache/prompts/``."""
        tokens = [t for t in re.split(r"__|\+", tag.strip()) if t]
        fields: dict[str, str] = {}
        kinds = set()
        for token in tokens:
            key = token.lower()
            if key == "openai-names":
                fields["names"] = "openai"
            elif key in ("def", "path"):
                kinds.add(key)
            elif key.startswith("kf-") and _SHA8.match(key[3:]):
                fields["knowledge_file"] = str(_cache_path("knowledge", key[3:]))
            elif key == "simple7":
                fields["templates"] = "simple7"
            elif key.startswith("tf-") and _SHA8.match(key[3:]):
                fields["templates"] = str(_cache_path("templates", key[3:]))
            elif key == "elevater":
                fields["style"] = "elevater"
            else:
                raise PromptError(f"{token!r} in recipe tag {tag!r} is not a recipe part; parts: openai-names, def, path, "
                                  "kf-<sha8>, simple7, tf-<sha8>, elevater.")
        if kinds:
            if "knowledge_file" in fields:
                raise PromptError(f"Recipe tag {tag!r} has WordNet knowledge and a knowledge file; one of them.")
            fields["knowledge"] = "def+path" if kinds == {"def", "path"} else next(iter(kinds))
        if fields.get("style") == "elevater" and not kinds and "knowledge_file" not in fields:
            raise PromptError(f"Recipe tag {tag!r}: 'elevater' needs knowledge (def, path or kf-…); without it both "
                              "styles give the same prompts.")
        return cls(**fields)

    @property
    def template_list(self) -> tuple[str, ...]:
        return templates_of(self.templates)


def split_recipe(model_id: str) -> tuple[str, Recipe]:
    """'clip-ViT-B-32.openai__def__path' -> ('clip-ViT-B-32.openai', Recipe(knowledge='def+path')):
    the trailing recipe tokens of a model id (strip a precision suffix first); (id, Recipe()) if none."""
    parts = model_id.split(RECIPE_SEPARATOR)
    for cut in range(1, len(parts)):
        try:
            recipe = Recipe.parse(RECIPE_SEPARATOR.join(parts[cut:]))
        except PromptError:
            continue
        return RECIPE_SEPARATOR.join(parts[:cut]), recipe
    return model_id, Recipe()


# --------------------------------------------------------------------------- names and knowledge
def _check(wnids) -> list[str]:
    return checked_wnids(wnids, PromptError)


def _lemma(synset, spaces: bool = True) -> str:
    name = synset.lemma_names()[0]
    return name.replace("_", " ") if spaces else name


def _up(synset):
    """Hypernyms and instance hypernyms, the most specific first (the deepest: domestic_cat.n.01 ->
    cat.n.01 (depth 13) before domestic_animal.n.01 (7)), ties in synset-name order (missile.n.01 ->
    rocket.n.01 before weapon.n.01, as in ELEVATER's path). A fixed order is needed: NLTK 3.10 keeps
    a synset's pointers in a set, so its own order changes from one process to the next. 453 of
    ImageNet-21k's classes have more than one hypernym."""
    up = synset.hypernyms() + synset.instance_hypernyms()
    if len(up) < 2:
        return up
    return sorted(up, key=lambda s: (-s.max_depth(), s.name()))


def hypernym_chain(wnid: str) -> list:
    """The class and its first hypernyms up to entity.n.01 ([lynx.n.02, wildcat.n.03, cat.n.01, …]):
    at each step the most specific hypernym (or instance hypernym; ``_up``)."""
    chain = [synset_of(wnid)]
    while True:
        up = _up(chain[-1])
        if not up or up[0] in chain:
            return chain
        chain.append(up[0])


@functools.lru_cache(maxsize=1)
def _openai_by_wnid() -> dict[str, str]:
    wnids = get_label_space("imagenet-1k").wnids
    assert len(wnids) == len(OPENAI_IMAGENET_CLASSNAMES) == 1000
    return dict(zip(wnids, OPENAI_IMAGENET_CLASSNAMES))


def class_names(wnids, names: str = "wordnet") -> dict[str, str]:
    """wnid -> class name for a label set (see the module docstring): WordNet's first lemma, made
    unique within ``wnids``; or OpenAI's ImageNet-1k names, WordNet's beyond ImageNet-1k."""
    if names not in NAMES:
        raise PromptError(f"Unknown names {names!r}: use {' or '.join(NAMES)}.")
    wnids = _check(wnids)
    fixed = {w: _openai_by_wnid()[w] for w in wnids if w in _openai_by_wnid()} if names == "openai" else {}
    out = {w: fixed.get(w) or _lemma(synset_of(w)) for w in wnids}

    def clashing() -> dict[str, list[str]]:
        by_name: dict[str, list[str]] = {}
        for w, n in out.items():
            by_name.setdefault(n.lower(), []).append(w)
        return {n: ws for n, ws in by_name.items() if len(ws) > 1 and any(w not in fixed for w in ws)}

    for group in clashing().values():  # 'crane' -> 'crane (wading bird)', 'crane (lifting device)'
        for w in group:
            if w not in fixed:
                up = _up(synset_of(w))
                out[w] = f"{out[w]} ({_lemma(up[0])})" if up else out[w]
    for group in clashing().values():
        for w in group:
            if w not in fixed:
                out[w] = f"{_lemma(synset_of(w))} ({synset_of(w).name()})"
    return out


def knowledge(wnids, kind: str, knowledge_file=None, *, style: str = "plain") -> dict[str, str]:
    """wnid -> knowledge text of one kind ('name' gives none): the WordNet definition, the
    hypernym path ('a kind of wildcat, a kind of cat'; style 'elevater': 'lynx wildcat cat'),
    both ('…: definition'), or a knowledge file's line. Classes without it are left out."""
    recipe = Recipe(knowledge=kind, knowledge_file=knowledge_file, style=style)
    wnids = _check(wnids)
    if recipe.knowledge == "name":
        return {}
    if recipe.knowledge == "file":
        table = read_knowledge_file(recipe.knowledge_file)
        return {w: table[w] for w in wnids if w in table}
    out = {}
    for w in wnids:
        parts = _knowledge_parts(w, recipe.knowledge, style)
        if parts:
            out[w] = "; ".join(parts) if style == "elevater" else _plain_knowledge(parts, recipe.knowledge)
    return out


def _knowledge_parts(wnid: str, kind: str, style: str) -> list[str]:
    """The knowledge items of a class, in order: [path], [definition] (ELEVATER: one each)."""
    synset = synset_of(wnid)
    items = []
    if kind in ("path", "def+path"):
        chain = hypernym_chain(wnid)
        if len(chain) > 1:
            if style == "elevater":
                items.append(" ".join(_lemma(s, spaces=False) for s in chain[:PATH_HYPERNYMS + 1]))
            else:
                items.append(", ".join(f"a kind of {_lemma(s)}" for s in chain[1:PATH_HYPERNYMS + 1]))
    if kind in ("def", "def+path") and synset.definition().strip():
        items.append(synset.definition().strip())
    if style == "elevater":
        items.reverse()  # ELEVATER's order when both are on: definition, then hierarchy
    return items


def _plain_knowledge(parts: list[str], kind: str) -> str:
    return ": ".join(parts)


def _sentence(prompt: str, text: str) -> str:
    """'a photo of a lynx.' + 'short-tailed …' -> 'a photo of a lynx, short-tailed ….'"""
    body = prompt[:-1] if prompt.endswith(".") else prompt
    end = "" if text.endswith((".", "!", "?")) else "."
    return f"{body}, {text}{end}"


def _elevater_suffix(name: str, item: str) -> str:
    """ELEVATER's ``' ' + ' '.join(word_tokenize(f' ; {classname} , ' + knowledge_text))``."""
    from nltk.tokenize import word_tokenize

    return " " + " ".join(word_tokenize(f" ; {name} , " + item, preserve_line=True))


def class_prompts(wnids, recipe: Recipe | None = None, *, only=None) -> dict[str, list[str]]:
    """wnid -> its prompts, one per template in template order, built from the wnid by the recipe.
    ``only``: build them for these classes of ``wnids`` alone (names are still made unique within
    ``wnids``): the Knowledge page shows one class's prompts, and tokenising ELEVATER's suffix for
    all 1000 classes of ImageNet-1k cost 1.8 s of its first load."""
    recipe = recipe or Recipe()
    wnids = _check(wnids)  # a list first: an iterator is read once (hostile campaign: a generator gave {})
    names = class_names(wnids, recipe.names)
    if only is not None:
        chosen = set(_check((only,) if isinstance(only, str) else only))  # one wnid as text, or several
        outside = sorted(chosen - set(wnids))
        if outside:
            raise PromptError(f"{outside[0]} is not a class of this label set; build its prompts with the set it is in.")
        wnids = [w for w in wnids if w in chosen]
    templates = templates_of(recipe.templates)
    if recipe.knowledge == "file":
        table = read_knowledge_file(recipe.knowledge_file)
        items = {w: [table[w]] for w in wnids if w in table}
    elif recipe.knowledge == "name":
        items = {}
    else:
        items = {w: _knowledge_parts(w, recipe.knowledge, recipe.style) for w in wnids}
    out = {}
    for w in wnids:
        name, extra = names[w], items.get(w) or []
        filled = [t.replace("{}", name) for t in templates]
        if not extra:
            out[w] = filled
        elif recipe.style == "elevater":
            suffix = "".join(_elevater_suffix(name, item) for item in extra)
            out[w] = [p + suffix for p in filled]
        else:
            text = extra[0] if recipe.knowledge == "file" else _plain_knowledge(extra, recipe.knowledge)
            out[w] = [_sentence(p, text) for p in filled]
    return out


def coverage(wnids, knowledge_file=None) -> dict[str, int]:
    """How many classes have each kind of knowledge: ``classes``, ``definition`` (a non-empty WordNet
    gloss), ``path`` (at least one hypernym), ``openai_name`` (an ImageNet-1k class, so OpenAI's
    name), and ``knowledge_file`` (a line in the file) when one is given."""
    wnids = _check(wnids)
    openai = _openai_by_wnid()
    out = {"classes": len(wnids),
           "definition": sum(bool(synset_of(w).definition().strip()) for w in wnids),
           "path": sum(bool(_up(synset_of(w))) for w in wnids),
           "openai_name": sum(w in openai for w in wnids)}
    if knowledge_file is not None:
        table = read_knowledge_file(knowledge_file)
        out["knowledge_file"] = sum(w in table for w in wnids)
    return out


__all__ = ["KNOWLEDGE", "NAMES", "OPENAI_IMAGENET_CLASSNAMES", "PATH_HYPERNYMS", "RECIPE_SEPARATOR", "STYLES",
           "TEMPLATES", "PromptError", "Recipe", "class_names", "class_prompts", "coverage", "hypernym_chain",
           "knowledge", "read_knowledge_file", "split_recipe", "templates_of"]
