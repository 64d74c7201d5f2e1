"""Prompts by wnid and zero-shot label sets (issue 14 items 2-4): the anchors' traps (lynx as 'a
text browser', the repeated 'missile' and 'sunglasses'), WordNet knowledge for every ImageNet-1k
class checked against NLTK, recipes as model-id tags, ELEVATER's exact format, label sets from a
run, a file or a sense, and ``python -m classify prompts``."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from classify.cli import main
from classify.zeroshot.labelsets import LabelSet, LabelSetError, read_wnid_file, resolve_label_set
from classify.zeroshot.prompts import (OPENAI_IMAGENET_CLASSNAMES, RECIPE_SEPARATOR, TEMPLATES, PromptError, Recipe,
                                       class_names, class_prompts, coverage, hypernym_chain, knowledge, split_recipe)
from core.labels import get_label_space, hyponym_classes
from core.runstore import _RUN_ID_RE, RunStore
from core.wordnet import get_wordnet

ROOT = Path(__file__).resolve().parents[3]
LYNX, TIGER_CAT, WILD_TIGER_CAT, TABBY = "n02127052", "n02123159", "n02126465", "n02123045"
LYNX_DEF = "short-tailed wildcats with usually tufted ears; valued for their fur"
TIGER_CAT_DEF = "a cat having a striped coat"
MISSILES = ("n03773504", "n04008634")  # missile.n.01, projectile.n.01: both 'missile' in OpenAI's list
SUNGLASSES = ("n04355933", "n04356056")  # sunglass.n.01, sunglasses.n.01: both 'sunglasses'
IN1K = get_label_space("imagenet-1k").wnids


def _nltk(wnid):
    """The reference: NLTK's public API on the same WordNet 3.0 corpus, by offset."""
    return get_wordnet().synset_from_pos_and_offset("n", int(wnid[1:]))


# --------------------------------------------------------------------------- the traps
def test_lynx_and_tiger_cat_definitions_come_from_their_wnids():
    assert _nltk(LYNX).name() == "lynx.n.02" and _nltk(TIGER_CAT).name() == "tiger_cat.n.02"
    found = knowledge([LYNX, TIGER_CAT], "def")
    assert found == {LYNX: _nltk(LYNX).definition(), TIGER_CAT: _nltk(TIGER_CAT).definition()}
    assert found == {LYNX: LYNX_DEF, TIGER_CAT: TIGER_CAT_DEF}
    prompts = class_prompts([LYNX, TIGER_CAT], Recipe(knowledge="def"))
    assert prompts[LYNX][0] == f"a bad photo of a lynx, {LYNX_DEF}."
    assert prompts[TIGER_CAT][0] == f"a bad photo of a tiger cat, {TIGER_CAT_DEF}."
    everything = " ".join(p for r in (Recipe(knowledge="def+path"), Recipe(knowledge="def+path", style="elevater"))
                          for ps in class_prompts([LYNX], r).values() for p in ps)
    assert "text browser" not in everything  # lynx.n.01, ELEVATER's first sense of the string
    assert knowledge([LYNX], "path")[LYNX] == "a kind of wildcat, a kind of cat"
    assert knowledge([TIGER_CAT], "path")[TIGER_CAT] == "a kind of domestic cat, a kind of cat"
    # The wild tiger cat is another class with the same name: both named apart when in one set.
    names = class_names([TIGER_CAT, WILD_TIGER_CAT])
    assert names == {TIGER_CAT: "tiger cat (domestic cat)", WILD_TIGER_CAT: "tiger cat (wildcat)"}


def test_missile_and_sunglasses_get_distinct_prompts_with_wordnet_names():
    wnids = [*MISSILES, *SUNGLASSES]
    names = class_names(wnids)
    assert names == {"n03773504": "missile", "n04008634": "projectile", "n04355933": "sunglass",
                     "n04356056": "sunglasses"}
    prompts = class_prompts(wnids)
    assert len({tuple(p) for p in prompts.values()}) == 4
    # OpenAI's names, mapped by the ImageNet-1k class order, repeat them as open_clip does.
    openai = class_names(wnids, "openai")
    assert openai == {"n03773504": "missile", "n04008634": "missile", "n04355933": "sunglasses",
                      "n04356056": "sunglasses"}
    assert [IN1K.index(w) for w in wnids] == [657, 744, 836, 837]
    assert all(OPENAI_IMAGENET_CLASSNAMES[IN1K.index(w)] == openai[w] for w in wnids)
    # Their WordNet definitions still tell them apart.
    with_def = class_prompts(wnids, Recipe(names="openai", knowledge="def", templates="simple7"))
    assert with_def["n03773504"] != with_def["n04008634"] and with_def["n04355933"] != with_def["n04356056"]


def test_wordnet_names_are_unique_within_a_label_set():
    for name in ("imagenet-1k", "imagenet-21k"):
        names = class_names(get_label_space(name).wnids)
        assert len({n.lower() for n in names.values()}) == len(names), name
    names = class_names(IN1K)
    assert names["n02012849"] == "crane (wading bird)" and names["n03126707"] == "crane (lifting device)"
    assert names["n03710637"] == "maillot (tights)" and names["n03710721"] == "maillot (swimsuit)"
    assert names[TABBY] == "tabby" and names[LYNX] == "lynx"


def test_openai_names_cover_imagenet_1k_and_fall_back_to_wordnet():
    names = class_names(IN1K, "openai")
    assert list(names.values()) == list(OPENAI_IMAGENET_CLASSNAMES)
    assert names["n01440764"] == "tench" and names[TIGER_CAT] == "tiger cat" and names["n02012849"] == "crane bird"
    outside = class_names([TIGER_CAT, WILD_TIGER_CAT], "openai")
    assert outside == {TIGER_CAT: "tiger cat", WILD_TIGER_CAT: "tiger cat (wildcat)"}


@pytest.mark.skipif(importlib.util.find_spec("open_clip") is None, reason="open_clip is not installed")
def test_templates_and_names_equal_open_clips():
    from open_clip import zero_shot_metadata as meta

    assert TEMPLATES["openai80"] == tuple(t("{}") for t in meta.OPENAI_IMAGENET_TEMPLATES)
    assert TEMPLATES["simple7"] == tuple(t("{}") for t in meta.SIMPLE_IMAGENET_TEMPLATES)
    assert OPENAI_IMAGENET_CLASSNAMES == tuple(meta.IMAGENET_CLASSNAMES)


def test_template_sets():
    assert len(TEMPLATES["openai80"]) == 80 and len(set(TEMPLATES["openai80"])) == 80
    assert len(TEMPLATES["simple7"]) == 7 and set(TEMPLATES["simple7"]) <= set(TEMPLATES["openai80"])
    assert all(t.count("{}") == 1 and t.endswith(".") for t in TEMPLATES["openai80"])
    assert TEMPLATES["openai80"][0] == "a bad photo of a {}." and TEMPLATES["simple7"][0] == "itap of a {}."
    assert len(OPENAI_IMAGENET_CLASSNAMES) == 1000
    prompts = class_prompts([LYNX, TIGER_CAT])
    assert [len(p) for p in prompts.values()] == [80, 80]
    assert prompts[LYNX] == [t.format("lynx") for t in TEMPLATES["openai80"]]  # open_clip's classifier text


# --------------------------------------------------------------------------- every ImageNet-1k class
def test_every_imagenet_1k_class_has_a_definition_and_a_path():
    assert coverage(IN1K) == {"classes": 1000, "definition": 1000, "path": 1000, "openai_name": 1000}
    definitions = knowledge(IN1K, "def")
    paths = knowledge(IN1K, "path", style="elevater")
    for wnid in IN1K:
        reference = _nltk(wnid)
        assert definitions[wnid] == reference.definition()
        chain = hypernym_chain(wnid)  # core.wordgraph's nouns, checked against NLTK's synsets here
        assert chain[0].name() == reference.name() and chain[-1].name() == "entity.n.01"
        for child, parent in zip(chain, chain[1:]):  # the deepest hypernym, ties by name
            theirs = _nltk(f"n{child.offset():08d}")
            up = theirs.hypernyms() + theirs.instance_hypernyms()
            assert parent.name() == min(up, key=lambda s: (-s.max_depth(), s.name())).name()
        assert paths[wnid] == " ".join(s.lemma_names()[0] for s in chain[:3])
    assert paths[LYNX] == "lynx wildcat cat" and paths[TIGER_CAT] == "tiger_cat domestic_cat cat"
    assert coverage(["n00001740"])["path"] == 0  # entity.n.01: nothing above it
    assert class_prompts(["n00001740"], Recipe(knowledge="path", templates="simple7"))["n00001740"][0] == "itap of a entity."


_DETERMINISM = """
import hashlib, json
from classify.zeroshot.prompts import class_names, hypernym_chain
from core.labels import get_label_space
from core.wordgraph import noun_of as synset_of  # what prompts.py reads (equal to NLTK: test_wordgraph)
wnids = [w for w in get_label_space("imagenet-21k").wnids
         if len(synset_of(w).hypernyms() + synset_of(w).instance_hypernyms()) > 1]
names = class_names(get_label_space("imagenet-21k").wnids)
chains = {w: [s.name() for s in hypernym_chain(w)] for w in wnids}
print(len(wnids), hashlib.sha256(json.dumps([names, chains], sort_keys=True).encode()).hexdigest())
"""


@pytest.mark.long
def test_paths_and_names_do_not_depend_on_the_process():
    """NLTK 3.10 keeps a synset's hypernym pointers in a set: their order follows string hashing,
    which changes per process. Paths and names must not. (The subprocesses read the noun graph, as
    prompts.py does, so they no longer start NLTK: 16 s -> about 5 s of the suite.)"""
    outputs = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", _DETERMINISM], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1 and outputs.pop().startswith("453 ")


# --------------------------------------------------------------------------- ELEVATER's exact format
def _elevater_reference(template: str, classname: str, knowledge_text: str) -> str:
    """ELEVATER's extract_text_features (vision_benchmark/evaluation/feature.py), one knowledge item."""
    from nltk.tokenize import word_tokenize

    knowledge_text = f" ; {classname} , " + knowledge_text
    knowledge_text = " " + " ".join(word_tokenize(knowledge_text, preserve_line=True))
    return template.format(classname) + knowledge_text


def test_elevater_style_reproduces_elevaters_format():
    recipe = Recipe(knowledge="def", style="elevater", templates="simple7")
    got = class_prompts([LYNX, TIGER_CAT], recipe)
    assert got[LYNX][0] == "itap of a lynx. ; lynx , short-tailed wildcats with usually tufted ears ; valued for their fur"
    for wnid, name, text in ((LYNX, "lynx", LYNX_DEF), (TIGER_CAT, "tiger cat", TIGER_CAT_DEF)):
        assert got[wnid] == [_elevater_reference(t, name, text) for t in TEMPLATES["simple7"]]
    path = class_prompts([LYNX], Recipe(knowledge="path", style="elevater", templates="simple7"))[LYNX]
    assert path == [_elevater_reference(t, "lynx", "lynx wildcat cat") for t in TEMPLATES["simple7"]]
    both = class_prompts([LYNX], Recipe(knowledge="def+path", style="elevater"))[LYNX][0]
    assert both == _elevater_reference("a bad photo of a {}.", "lynx", LYNX_DEF) + " ; lynx , lynx wildcat cat"
    # Without knowledge both styles are open_clip's prompts, and the same recipe.
    assert class_prompts([LYNX], Recipe(style="elevater")) == class_prompts([LYNX], Recipe())
    assert Recipe(style="elevater").tag() == ""


def test_plain_style_sentences():
    got = class_prompts([LYNX], Recipe(knowledge="def+path", templates="simple7"))[LYNX]
    assert got[0] == f"itap of a lynx, a kind of wildcat, a kind of cat: {LYNX_DEF}."
    assert got[4] == f"a lynx in a video game, a kind of wildcat, a kind of cat: {LYNX_DEF}."


# --------------------------------------------------------------------------- recipes as model-id tags
RECIPES = [Recipe(), Recipe(knowledge="def"), Recipe(knowledge="path"), Recipe(knowledge="def+path"),
           Recipe(names="openai"), Recipe(templates="simple7"), Recipe(knowledge="def", style="elevater"),
           Recipe(names="openai", knowledge="def+path", templates="simple7", style="elevater")]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.tag() or "default")
def test_recipe_tags_round_trip_and_fit_a_model_id(recipe):
    tag = recipe.tag()
    assert Recipe.parse(tag) == recipe
    model_id = "clip-ViT-B-32.openai" + tag
    assert _RUN_ID_RE.match(model_id), model_id  # a model id names a folder: letters, digits, _ . -
    assert split_recipe(model_id) == ("clip-ViT-B-32.openai", recipe)


def test_recipe_tag_values():
    assert [r.tag() for r in RECIPES] == [
        "", "__def", "__path", "__def__path", "__openai-names", "__simple7", "__def__elevater",
        "__openai-names__def__path__simple7__elevater"]
    assert RECIPE_SEPARATOR == "__" and Recipe.parse("+def+path") == Recipe(knowledge="def+path")
    assert split_recipe("efficientnet_lite0") == ("efficientnet_lite0", Recipe())
    with pytest.raises(PromptError, match="not a recipe part"):
        Recipe.parse("__wiki")
    with pytest.raises(PromptError, match="Unknown knowledge"):
        Recipe(knowledge="wiki")
    with pytest.raises(PromptError, match="needs --knowledge-file"):
        Recipe(knowledge="file")
    with pytest.raises(PromptError, match="drop one"):
        Recipe(knowledge="def", knowledge_file="k.tsv")


def test_user_knowledge_and_template_files(tmp_path):
    tsv = tmp_path / "wiktionary.tsv"
    tsv.write_text(f"# Wiktionary\n{LYNX}\tAny of several medium-sized wild cats, mostly of the genus Lynx.\n")
    recipe = Recipe(knowledge_file=str(tsv))
    assert recipe.knowledge == "file" and re.fullmatch(r"__kf-[0-9a-f]{8}", recipe.tag())
    got = class_prompts([LYNX, TABBY], recipe)
    assert got[LYNX][0] == "a bad photo of a lynx, Any of several medium-sized wild cats, mostly of the genus Lynx."
    assert got[TABBY][0] == "a bad photo of a tabby."  # no line for it: the templates alone
    assert coverage([LYNX, TABBY], knowledge_file=str(tsv))["knowledge_file"] == 1
    # The tag read back names the copy kept in the cache, which gives the same prompts.
    again = Recipe.parse(recipe.tag())
    assert Path(again.knowledge_file).is_file() and class_prompts([LYNX, TABBY], again) == got
    templates = tmp_path / "mine.txt"
    templates.write_text("# two\na photo of a {}.\n\nthe {} again.\n")
    recipe = Recipe(templates=str(templates))
    assert class_prompts([LYNX], recipe)[LYNX] == ["a photo of a lynx.", "the lynx again."]
    assert class_prompts([LYNX], Recipe.parse(recipe.tag())) == class_prompts([LYNX], recipe)
    bad = tmp_path / "bad.tsv"
    bad.write_text(f"{LYNX}\tfine\nlynx\tnot a wnid\n")
    with pytest.raises(PromptError, match="line 2"):
        class_prompts([LYNX], Recipe(knowledge_file=str(bad)))
    bad.write_text(f"{LYNX}\tone\n{LYNX}\ttwo\n")
    with pytest.raises(PromptError, match="line 2: n02127052 again"):
        class_prompts([LYNX], Recipe(knowledge_file=str(bad)))
    templates.write_text("a photo of a {}.\nno placeholder\n")
    with pytest.raises(PromptError, match="line 2"):
        class_prompts([LYNX], Recipe(templates=str(templates)))
    with pytest.raises(PromptError, match="Unknown templates"):
        class_prompts([LYNX], Recipe(templates="openai81"))
    with pytest.raises(PromptError, match="not a wnid"):
        class_prompts(["lynx"])



def test_files_saved_with_a_byte_order_mark_read_as_without_it(tmp_path):
    """Second campaign: a UTF-8 BOM (Windows Notepad's 'UTF-8') stayed in the first line. A
    templates file's first template became '\ufeffa photo of a {}.', so every class's first prompt
    carried an invisible U+FEFF into the text encoder (silently other prompts, exit 0); a knowledge
    file's and a label-set file's first line were refused as '\ufeffn02127052' is not a wnid."""
    templates = tmp_path / "mine.txt"
    templates.write_bytes("\ufeffa photo of a {}.\r\nthe {} again.\r\n".encode("utf-8"))
    prompts = class_prompts([LYNX], Recipe(templates=str(templates)))[LYNX]
    assert prompts == ["a photo of a lynx.", "the lynx again."], prompts
    tsv = tmp_path / "knowledge.tsv"
    tsv.write_bytes(f"\ufeff{LYNX}\tA wild cat with tufted ears.\r\n".encode("utf-8"))
    got = class_prompts([LYNX], Recipe(knowledge_file=str(tsv)))[LYNX]
    assert got[0] == "a bad photo of a lynx, A wild cat with tufted ears.", got[0]
    listing = tmp_path / "cats.txt"
    listing.write_bytes(f"\ufeff{LYNX}\r\n{TABBY}\r\n".encode("utf-8"))
    assert read_wnid_file(listing) == tuple(sorted([LYNX, TABBY]))

# --------------------------------------------------------------------------- label sets
def test_label_sets_resolve():
    one_k = resolve_label_set("imagenet-1k")
    assert one_k == LabelSet("imagenet-1k", IN1K) and resolve_label_set("in1k").name == "imagenet-1k"
    cats = resolve_label_set("sense:n02121620")
    assert cats.name == "sense:cat.n.01" and WILD_TIGER_CAT in cats.wnids and len(cats) == 39
    assert {c.wnid for c in hyponym_classes("cat.n.01", "imagenet-21k")} <= set(cats.wnids)


def test_file_and_run_label_sets_are_stored_and_read_back(tmp_path):
    listing = tmp_path / "cats.txt"
    listing.write_text(f"# my classes\n{LYNX}\tlynx\n\n{TIGER_CAT}\n{LYNX}\n{WILD_TIGER_CAT} wild one\n")
    assert read_wnid_file(listing) == (TIGER_CAT, WILD_TIGER_CAT, LYNX)
    found = resolve_label_set(str(listing))
    assert found.name.startswith("file:") and found.wnids == (TIGER_CAT, WILD_TIGER_CAT, LYNX)
    get_label_space.cache_clear()
    assert get_label_space(found.name).wnids == found.wnids and resolve_label_set(found.name) == found
    run = RunStore().create_run(title="cats", wnids=[LYNX, TIGER_CAT, WILD_TIGER_CAT])
    assert resolve_label_set("run", run=run) == found  # the same classes: the same stored set
    assert resolve_label_set("run", run=run.run_id) == found
    with pytest.raises(LabelSetError, match="needs a run"):
        resolve_label_set("run")


@pytest.mark.parametrize("content,where", [("n02127052\nlynx\n", "line 2: 'lynx' is not a wnid"),
                                           ("\n\nn99999999\n", "line 3: n99999999 is not a noun"),
                                           ("# nothing\n", "has no wnid")])
def test_bad_label_set_files_name_the_line(tmp_path, content, where):
    listing = tmp_path / "bad.txt"
    listing.write_text(content)
    with pytest.raises(LabelSetError) as info:
        resolve_label_set(str(listing))
    assert where in str(info.value) and "\n" not in str(info.value)


def test_unknown_label_set_says_what_works(tmp_path):
    with pytest.raises(LabelSetError, match="sense:SYNSET .* file:SHA .* file of wnids"):
        resolve_label_set(str(tmp_path / "missing.txt"))
    with pytest.raises(LabelSetError, match="ambiguous"):
        resolve_label_set("sense:cat")


# --------------------------------------------------------------------------- python -m classify prompts
def test_cli_prints_wnid_tab_prompt_lines(capsys):
    assert main(["prompts", "--wnids", f"{LYNX},{TIGER_CAT}", "--knowledge", "def"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 160 and all(line.count("\t") == 1 for line in lines)
    assert lines[0] == f"{LYNX}\ta bad photo of a lynx, {LYNX_DEF}."
    assert lines[80] == f"{TIGER_CAT}\ta bad photo of a tiger cat, {TIGER_CAT_DEF}."
    assert [line.split("\t")[0] for line in lines] == [LYNX] * 80 + [TIGER_CAT] * 80
    assert "recipe tag __def" in err
    assert main(["prompts", "--label-set", "sense:cat.n.01", "--templates", "simple7", "--style", "elevater",
                 "--knowledge", "path"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 39 * 7 and f"{LYNX}\titap of a lynx. ; lynx , lynx wildcat cat" in out


def test_cli_coverage(capsys):
    assert main(["prompts", "--label-set", "imagenet-1k", "--coverage"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["label_set\tclasses\tdefinition\tpath\topenai_name", "imagenet-1k\t1000\t1000\t1000\t1000"]
    assert main(["prompts", "--label-set", "sense:cat.n.01", "--coverage"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "sense:cat.n.01\t39\t39\t39\t7"


@pytest.mark.parametrize("argv,words", [
    (["prompts", "--label-set", "sense:cat"], "ambiguous"),
    (["prompts", "--wnids", "lynx"], "not a wnid"),
    (["prompts", "--label-set", "nowhere.txt"], "Unknown label set"),
    (["prompts", "--wnids", LYNX, "--templates", "openai81"], "Unknown templates"),
    (["prompts", "--wnids", LYNX, "--knowledge", "def", "--knowledge-file", "k.tsv"], "drop one"),
])
def test_cli_errors_are_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1


def test_done_when_command_offline():
    """The issue's 'done when': the two definitions, printed by the real entry point."""
    done = subprocess.run([sys.executable, "-m", "classify", "prompts", "--wnids", f"{LYNX},{TIGER_CAT}",
                           "--knowledge", "def"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert f"{LYNX}\ta bad photo of a lynx, {LYNX_DEF}." in done.stdout.splitlines()
    assert f"{TIGER_CAT}\ta photo of a tiger cat, {TIGER_CAT_DEF}." in done.stdout.splitlines()


@pytest.mark.parametrize("name", ["k{1}.tsv", "k{x}.tsv", "k{}.tsv"])
def test_a_bad_line_in_a_knowledge_file_whose_path_holds_braces_is_one_line(name, tmp_path, capsys):
    """Issue 22 item 9: the message was built with .format() on a string holding the path, so
    'k{1}.tsv' raised IndexError (and 'k{x}.tsv' KeyError) instead of naming the bad line."""
    tsv = tmp_path / name
    tsv.write_text("bad line\n")
    with pytest.raises(PromptError, match=r"line 1: expected 'wnid<TAB>text'.*got 'bad line'"):
        class_prompts([LYNX], Recipe(knowledge_file=str(tsv)))
    assert main(["prompts", "--wnids", LYNX, "--knowledge-file", str(tsv)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and name in err and "\n" not in err


@pytest.mark.parametrize("make, kind", [(lambda p: os.mkfifo(p), "a FIFO (named pipe)"), (lambda p: p.mkdir(), "a folder")])
def test_a_knowledge_or_template_path_that_is_no_file_says_what_it_is(tmp_path, make, kind):
    """A FIFO was 'does not exist' (knowledge) or an unknown template-set name (templates); it is
    never opened, so it cannot block."""
    from classify.zeroshot.prompts import PromptError, read_knowledge_file, templates_of

    path = tmp_path / "given.tsv"
    make(path)
    with pytest.raises(PromptError, match=rf"The knowledge file .*given.tsv is {re.escape(kind)}, not a file"):
        read_knowledge_file(path)
    with pytest.raises(PromptError, match=rf"The template file .*given.tsv is {re.escape(kind)}, not a file"):
        templates_of(str(path))


@pytest.mark.parametrize("recipe", [Recipe(), Recipe(knowledge="def+path", style="elevater"),
                                    Recipe(names="openai", knowledge="path", templates="simple7")])
def test_prompts_of_one_class_equal_that_class_in_the_whole_set(recipe):
    """class_prompts(..., only=) (the Knowledge page's one class) gives what the whole set gives for
    it, names made unique within the set: both cranes keep their qualified names."""
    from classify.zeroshot.prompts import class_prompts

    wnids = list(get_label_space("imagenet-1k").wnids[:40]) + ["n02012849", "n03126707"]  # crane: the bird, the machine
    whole = class_prompts(wnids, recipe)
    for w in ("n02012849", "n03126707", wnids[3]):
        assert class_prompts(wnids, recipe, only=(w,)) == {w: whole[w]}
    with pytest.raises(PromptError, match="not a class of this label set"):
        class_prompts(wnids[:5], recipe, only=(wnids[10],))
    # an iterator of wnids is read once (hostile campaign: a generator gave {}); one wnid as text
    assert class_prompts(iter(wnids), recipe, only=wnids[3]) == {wnids[3]: whole[wnids[3]]}
    assert class_prompts((w for w in wnids[:4]), recipe) == {w: whole[w] for w in wnids[:4]}
