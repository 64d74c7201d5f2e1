"""Search terms per class: the defaults disambiguate lemmas that name two classes (issue 12 item 3),
and terms a person edits reach the engine and the manifest."""
import pytest

from core.errors import OptionError
from core.runstore import RunStore
from crawl.cli import main
from crawl.crawler import clean_search_terms, crawl_run, default_search_terms, homonyms, search_terms
from crawl.store import FolderDestination
from tests.crawl import fake_engine as T
from tests.crawl.test_engine import fast_config

CRANE_BIRD, CRANE_MACHINE = "n02012849", "n03126707"
TABBY, PERSIAN = "n02123045", "n02123394"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


@pytest.fixture
def searched(monkeypatch) -> list[str]:
    """Every search term sent to the engine, in order (the keyword of each term's crawl)."""
    import crawl.crawler

    terms: list[str] = []

    class Recording(crawl.crawler.EngineCrawler):
        def run(self, job, feeder_kwargs, *args, **kwargs):
            terms.append(feeder_kwargs["keyword"])
            return super().run(job, feeder_kwargs, *args, **kwargs)

    monkeypatch.setattr(crawl.crawler, "EngineCrawler", Recording)
    return terms


def test_a_lemma_naming_two_classes_is_qualified_by_the_hypernym():
    assert homonyms(CRANE_BIRD) == {"crane": [CRANE_MACHINE]}
    assert search_terms(CRANE_BIRD) == ["crane bird"]  # hypernym: wading bird
    assert search_terms(CRANE_MACHINE) == ["crane device"]  # hypernym: lifting device
    assert search_terms(CRANE_BIRD, context="bird") == ["crane bird"]  # no 'crane bird bird'
    # 'maillot' is ImageNet-1k's other doubled name; a class's unshared lemmas stay as they are
    assert search_terms("n03710721") == ["maillot swimsuit", "tank suit"]
    assert homonyms(TABBY) == {} and search_terms(TABBY) == ["tabby", "tabby cat"]
    assert default_search_terms([CRANE_BIRD, TABBY, CRANE_BIRD]) == {CRANE_BIRD: ["crane bird"],
                                                                    TABBY: ["tabby", "tabby cat"]}


def test_terms_as_a_person_types_them():
    assert clean_search_terms(" crane  bird ;whooping crane;; Crane Bird") == ["crane bird", "whooping crane"]
    assert clean_search_terms(["a\tb", "", "c"]) == ["a b", "c"]
    with pytest.raises(OptionError, match="at most 200"):
        clean_search_terms("x" * 201)


def test_default_terms_are_what_the_crawl_searches(tmp_path, searched):
    with T.FakeEngine() as engine:
        engine.results["crane bird"] = [engine.add(f"/c/{i}.jpg", T.jpeg(700 + i)) for i in range(3)]
        summary = crawl_run(tmp_path, [CRANE_BIRD], k=2, config=fast_config(engine))
    assert summary.complete
    manifest = FolderDestination(tmp_path).read_manifest()
    assert set(manifest["search_term"]) == {"crane bird"}
    assert searched == ["crane bird"]


def test_edited_terms_reach_the_engine_and_the_manifest(searched):
    store = RunStore()
    run = store.create_run(run_id="cranes", query="crane", sense="crane.n.05")
    with T.FakeEngine() as engine:
        engine.results["grey crane in flight"] = [engine.add(f"/g/{i}.jpg", T.jpeg(800 + i)) for i in range(1)]
        engine.results["sandhill crane"] = [engine.add(f"/s/{i}.jpg", T.jpeg(900 + i)) for i in range(3)]
        engine.results["tabby"] = [engine.add(f"/t/{i}.jpg", T.jpeg(950 + i)) for i in range(3)]
        summary = crawl_run(run, [CRANE_BIRD, TABBY], k=2, config=fast_config(engine),
                            search_terms={CRANE_BIRD: [" grey crane  in flight", "sandhill crane"]})
    assert summary.complete
    # the edited class searched its terms in the order given, the other class its defaults
    assert searched == ["grey crane in flight", "sandhill crane", "tabby"]
    usable = run.usable_images()
    by_class = usable.groupby("wnid")["search_term"].apply(set).to_dict()
    assert by_class == {CRANE_BIRD: {"grey crane in flight", "sandhill crane"}, TABBY: {"tabby"}}


def test_bad_terms_are_refused_before_the_engine_is_asked(tmp_path):
    with T.FakeEngine() as engine:
        config = fast_config(engine)
        with pytest.raises(OptionError, match="No search term left for n02012849"):
            crawl_run(tmp_path, [CRANE_BIRD], k=1, config=config, search_terms={CRANE_BIRD: " ; "})
        with pytest.raises(OptionError, match="does not collect"):
            crawl_run(tmp_path, [CRANE_BIRD], k=1, config=config, search_terms={PERSIAN: ["Persian cat"]})
    assert sum(engine.hits.values()) == 0


def test_command_line_terms_and_term_option(tmp_path, capsys, searched):
    assert main(["terms", "--wnids", f"{CRANE_BIRD},{TABBY}"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{CRANE_BIRD}\tcrane bird", f"{TABBY}\ttabby; tabby cat"]
    with T.FakeEngine() as engine:
        engine.results["Grus grus"] = [engine.add(f"/c/{i}.jpg", T.jpeg(990 + i)) for i in range(2)]
        code = main(["fetch", "--wnids", CRANE_BIRD, "--k", "2", "--base-url", engine.base_url, "--threads", "1",
                     "--no-progress", "--term", f"{CRANE_BIRD}=Grus grus", "--out", str(tmp_path / "out")])
    assert code == 0 and searched == ["Grus grus"]
    assert set(FolderDestination(tmp_path / "out").read_manifest()["search_term"]) == {"Grus grus"}
    assert main(["fetch", "--wnids", CRANE_BIRD, "--term", "crane", "--out", str(tmp_path / "o2")]) == 2
    assert "--term expects WNID=TEXT" in capsys.readouterr().err


def test_terms_for_a_wnid_that_is_no_noun_is_one_line(capsys):
    """Issue 22 item 9: 'crawl terms --wnids n99999999' was a KeyError traceback."""
    assert main(["terms", "--wnids", "n02123045,n99999999"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: Not WordNet 3.0 noun ids: n99999999; give wnids such as n02123045.\n")
    assert main(["terms", "--wnids", "n02126317"]) == 0  # leopard cat: not IN-1k, still a noun with lemmas
    assert capsys.readouterr().out.startswith("n02126317\tleopard cat")
