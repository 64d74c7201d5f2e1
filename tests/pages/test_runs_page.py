"""The Runs page's rename and delete, plain-text titles, and the current run after a page creates
one (issue 22 items 1, 18 and 21), through AppTest.

Tiny hand-made runs, no sample inference (tests/pages/test_import_page.py's ``home``: an empty store
per test, ``ensure_sample_run`` a no-op)."""
import re

from core.runstore import Run
from tests.pages.test_import_page import home, make_run, run_ids, start, write_images  # noqa: F401  (home is a fixture)


def runs_picker(at):
    (picker,) = [s for s in at.main.selectbox if s.label == "Run"]
    return picker


def no_traceback(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


# --------------------------------------------------------------------------- item 1: rename, then delete
def test_rename_then_delete_names_and_deletes_the_picked_run(home):
    """The issue's steps, the sidebar on the sample: pick X on the Runs page, rename it, ask to
    delete. The picker was an unkeyed select box whose identity held its labels: the rename made it
    a new widget, back on the current run (the sample), and the delete then offered the sample."""
    make_run(home, "sample", "Sample photographs", is_sample=True)
    x = make_run(home, "x-run", "old title")
    at = start()
    assert at.sidebar.selectbox(key="run_id").value == "sample"
    runs_picker(at).set_value("x-run").run()
    at.text_input(key="title-x-run").set_value("new title")
    at.button(key="rename-save").click().run()  # typed, Enter (it submits the form, as the click does)
    at.button(key="rename-save").click().run()  # then Save title
    no_traceback(at)
    assert home.open_run("x-run").info.title == "new title"
    assert runs_picker(at).value == "x-run"  # the picker still shows the renamed run
    at.button(key="delete-ask").click().run()
    no_traceback(at)
    (warning,) = at.warning
    assert "(x-run)" in warning.value and "new title" in warning.value
    assert at.button(key="delete-confirm").label == "Delete x-run for good"
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert run_ids(home) == ["sample"] and not x.path.exists()
    assert at.sidebar.selectbox(key="run_id").value == "sample" and at.query_params["run"] == "sample"
    assert any("(x-run) deleted" in s.value for s in at.success)


class BrowserLabels:
    """Reruns ``at`` as the browser does for its select boxes: in Streamlit 1.67 a select box's value
    on the wire is its option's label, and the browser keeps the label it last got (the server
    sends one only when it sets the value: proto.set_value) and sends it back on every rerun.
    AppTest sends the label of the value under today's labels instead, so it never sees a label
    go stale after a rename."""

    def __init__(self, at):
        self.at, self.held = at, {}
        self.observe()

    def observe(self) -> None:
        for box in self.at.selectbox:
            proto = box.proto
            if proto.set_value:
                self.held[proto.id] = proto.raw_value
            elif proto.id not in self.held:
                self.held[proto.id] = proto.options[proto.default]

    def run(self):
        tree = self.at._tree
        sent = tree.get_widget_states

        def held_labels():
            states = sent()
            for widget in states.widgets:
                if widget.id in self.held:
                    widget.string_value = self.held[widget.id]
            return states

        tree.get_widget_states = held_labels
        self.at.run()
        no_traceback(self.at)
        self.observe()
        return self.at


def test_a_rename_keeps_both_pickers_on_the_run_in_the_browser(home):
    """In the browser the rename left both select boxes holding the run's old label; the next click
    sent it back, it matched no option, and each box fell back to its first option: the sidebar's
    current run became the newest run (here the sample, ?run=sample) and the delete offered it."""
    make_run(home, "x-run", "old title")
    make_run(home, "sample", "Sample photographs", is_sample=True)  # the newest: first in both lists
    at = start(run_id="x-run")
    browser = BrowserLabels(at)
    at.text_input(key="title-x-run").set_value("new title")
    at.button(key="rename-save").click()
    browser.run()
    assert home.open_run("x-run").info.title == "new title"
    at.button(key="delete-ask").click()
    browser.run()
    assert at.sidebar.selectbox(key="run_id").value == "x-run" and at.query_params["run"] == "x-run"
    assert runs_picker(at).value == "x-run"
    assert at.button(key="delete-confirm").label == "Delete x-run for good"
    browser.run()  # and the next click too
    assert at.sidebar.selectbox(key="run_id").value == "x-run" and runs_picker(at).value == "x-run"


def test_save_title_is_one_click_and_reads_no_manifest_again(home, monkeypatch):
    """Save title was disabled until the typed title reached the server (the first click only
    committed the text and enabled the button), and every rerun read every run's manifest again
    (a cache of 8 manifests cycled through by 9+ runs never hits): a form saves on one click, and
    the images column is counted once per manifest change."""
    for i in range(10):
        make_run(home, f"run-{i}", f"run {i}")
    reads = []
    real = Run.read_manifest
    monkeypatch.setattr(Run, "read_manifest", lambda self: reads.append(self.run_id) or real(self))
    at = start(run_id="run-3")
    assert not at.button(key="rename-save").disabled
    at.text_input(key="title-run-3").set_value("garden cats")
    at.button(key="rename-save").click().run()  # one click: the text goes with it
    no_traceback(at)
    assert home.open_run("run-3").info.title == "garden cats"
    assert any("renamed to garden cats" in s.value for s in at.success)
    reads.clear()
    at.run()
    runs_picker(at).set_value("run-5").run()
    at.text_input(key="title-run-5").set_value("other")
    at.button(key="rename-save").click().run()
    no_traceback(at)
    assert reads == [], "no manifest is read again while none changed"


def test_the_runs_picker_follows_the_sidebar(home):
    make_run(home, "sample", "Sample photographs", is_sample=True)
    make_run(home, "x-run", "x")
    at = start()
    assert runs_picker(at).value == "sample"
    at.sidebar.selectbox(key="run_id").set_value("x-run").run()
    assert runs_picker(at).value == "x-run"


def test_a_delete_confirms_only_the_run_it_was_asked_for(home):
    """The confirm click carries the id it was drawn for: renamed, deleted or no longer picked
    since, it is refused with one line and nothing is deleted."""
    make_run(home, "sample", "Sample photographs", is_sample=True)
    x = make_run(home, "x-run", "x title")
    at = start(run_id="x-run")
    at.button(key="delete-ask").click().run()
    home.rename_run("x-run", "renamed elsewhere")  # another tab, the CLI
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert x.path.exists()
    (error,) = at.error
    assert "renamed" in error.value and "nothing was deleted" in error.value.replace("\\", "")
    assert "renamed elsewhere" in at.warning[0].value.replace("\\", "")  # asked again, with its new title

    runs_picker(at).set_value("sample")
    at.button(key="delete-confirm").click().run()  # a stale click on the confirmation of x-run
    no_traceback(at)
    assert set(run_ids(home)) == {"sample", "x-run"}
    assert any("x-run" in e.value and "nothing was deleted" in e.value.replace("\\", "") for e in at.error)

    runs_picker(at).set_value("x-run").run()
    at.button(key="delete-ask").click().run()
    home.delete_run("x-run")
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert run_ids(home) == ["sample"]
    assert any("x-run" in e.value and "no longer" in e.value for e in at.error)


# --------------------------------------------------------------------------- item 18: titles are plain text
# What the browser's Markdown (remark-gfm's autolink literals) turns into a link, after the
# backslash escapes are read: a URL, www.<host> or an e-mail address.
AUTOLINK = re.compile(r"(?i)(?:^|[\s(*_~])(?:https?://|www\.)\w|[\w.+-]@[\w-]+\.\w")


def autolinks(texts) -> list[str]:
    read = [re.sub(r"\\(.)", r"\1", t) for t in texts]
    return [t for t in read if AUTOLINK.search(t)]


def test_a_url_in_a_title_is_no_link_in_the_sidebar_or_on_the_runs_page(home):
    from tests.pages.test_hostile_day import rendered

    title = "see http://evil.example/x, www.evil.example or mail a@evil.example"
    make_run(home, "sample", "Sample photographs", is_sample=True)
    make_run(home, "x-run", title)
    at = start(run_id="x-run")
    texts = rendered(at)
    assert any("evil" in t for t in at.sidebar.caption.values), "the sidebar shows the title"
    at.button(key="delete-ask").click().run()
    texts += rendered(at)
    assert any("evil" in t for t in at.warning.values)  # Delete run ...?
    at.button(key="delete-confirm").click().run()
    texts += rendered(at)
    assert any("evil" in t for t in at.success.values)  # ... deleted
    assert not autolinks(texts), autolinks(texts)


def test_escape_markdown_breaks_every_autolink_literal():
    from pages.text import escape_markdown

    for text in ("http://x.example", "HTTPS://x.example/a?b", "www.x.example", "(WWW.x.example)", "a@b.example",
                 "*www.x.example*", "mailto:a@b.example"):
        assert not autolinks([escape_markdown(text)]), text
        assert escape_markdown(text).replace("\u2060", "").replace("\\", "") == text  # reads the same


# --------------------------------------------------------------------------- item 21: links and the new run
def test_the_sidebar_links_carry_the_run(home):
    make_run(home, "sample", "Sample photographs", is_sample=True)
    make_run(home, "x-run", "x")
    at = start(run_id="x-run")
    links = at.sidebar.get("page_link")
    assert len(links) == 12, [link.proto.page for link in links]  # every page of app.py
    assert {link.proto.query_string for link in links} == {"run=x-run"}
    at.sidebar.selectbox(key="run_id").set_value("sample").run()
    assert {link.proto.query_string for link in at.sidebar.get("page_link")} == {"run=sample"}


def test_an_import_makes_its_run_current_at_once(home, tmp_path):
    make_run(home, "sample", "Sample photographs", is_sample=True)
    src = tmp_path / "photos"
    write_images(src / "tabby", 700)
    at = start("pages/import_page.py")
    assert at.sidebar.selectbox(key="run_id").value == "sample"
    at.text_input(key="import_folder").set_value(str(src)).run()
    at.button(key="import-go").click().run()
    no_traceback(at)
    (new,) = set(run_ids(home)) - {"sample"}
    assert at.query_params["run"] == new
    (picker,) = at.sidebar.selectbox
    assert picker.value == new, "the sidebar shows the new run without another click"
    assert {link.proto.query_string for link in at.sidebar.get("page_link")} == {f"run={new}"}
    assert any(new in s.value for s in at.success)  # the import's summary stays on screen
    at.run()  # any next click: the new run stays current
    assert at.sidebar.selectbox(key="run_id").value == new and at.query_params["run"] == new


def test_an_uploaded_predictions_file_makes_its_run_current_at_once(home):
    make_run(home, "sample", "Sample photographs", is_sample=True)
    at = start()
    rest = "n02123394,n02123597,n02124075,n02127052"  # Persian, Siamese, Egyptian cat, lynx
    rows = [f"m_up,n02123045,{'n02123045' if i % 2 else 'n02123159'},{rest},0.9" for i in range(4)]
    csv = "model,true_wnid,pred_wnid,pred_wnid_2,pred_wnid_3,pred_wnid_4,pred_wnid_5,prob_1\n" + "\n".join(rows) + "\n"
    at.get("file_uploader")[0].upload("my preds.csv", csv.encode(), "text/csv").run()
    at.button(key="upload-create").click().run()
    no_traceback(at)
    assert not at.error, [e.value for e in at.error]
    (new,) = set(run_ids(home)) - {"sample"}
    assert at.query_params["run"] == new and at.sidebar.selectbox[0].value == new
    at.run()
    assert at.sidebar.selectbox(key="run_id").value == new and runs_picker(at).value == new


def test_a_run_with_a_linked_part_can_still_be_deleted_and_the_link_target_is_kept(home, tmp_path):
    """A part file replaced by a symbolic link is refused by every reader (core.parts): the Runs page's
    delete confirmation says the stored predictions cannot be read instead of a traceback, the delete
    removes the run, and the file the link pointed to is left as it was (review of the link refusal)."""
    make_run(home, "sample", "Sample photographs", is_sample=True)
    x = make_run(home, "x-run", "linked")
    part = next(x.predictions_dir.glob("*/part-*.parquet"))
    outside = tmp_path / "theirs.parquet"
    outside.write_bytes(part.read_bytes())
    part.unlink()
    part.symlink_to(outside)
    at = start()
    runs_picker(at).set_value("x-run").run()
    at.button(key="delete-ask").click().run()
    no_traceback(at)
    (warning,) = at.warning
    assert "stored predictions (unreadable" in warning.value
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert run_ids(home) == ["sample"] and not x.path.exists() and outside.is_file()


def test_deleting_a_run_whose_folder_is_a_link_says_only_the_link_goes(home, tmp_path):
    """A hostile campaign: for a run folder that is a symbolic link (a run kept on another disk) the delete removes the
    link alone and keeps the folder it leads to, but the confirmation announced its images and every file gone, and
    the result 'deleted with N images'. Both now say what happens."""
    import shutil

    make_run(home, "sample", "Sample photographs", is_sample=True)
    x = make_run(home, "x-run", "kept elsewhere")
    elsewhere = tmp_path / "other-disk" / "x-run"
    elsewhere.parent.mkdir()
    shutil.move(str(x.path), elsewhere)
    x.path.symlink_to(elsewhere, target_is_directory=True)
    at = start()
    runs_picker(at).set_value("x-run").run()
    at.button(key="delete-ask").click().run()
    no_traceback(at)
    (warning,) = at.warning
    assert "removes the link" in warning.value and "stay where they are" in warning.value
    assert "every other file" not in warning.value
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert run_ids(home) == ["sample"] and not x.path.is_symlink() and (elsewhere / "run.json").is_file()
    assert any("its link removed, the folder it led to kept" in s.value for s in at.success)


def test_a_run_with_a_damaged_manifest_is_listed_and_can_be_deleted(home):
    """A manifest that cannot be read (here a hand-written Parquet naming a column twice): the run is
    listed with no image count and its delete says its images, instead of the run missing from the
    list (image_count's StoreError was taken for a run deleted since it was listed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    make_run(home, "sample", "Sample photographs", is_sample=True)
    x = make_run(home, "x-run", "damaged")
    table = pq.read_table(x.manifest_path)
    pq.write_table(pa.table(table.columns + [table.column("file")], names=table.column_names + ["file"]),
                   x.manifest_path)
    at = start()
    no_traceback(at)
    (listed,) = [t for t in at.main.dataframe if "run" in t.value.columns]
    row = listed.value[listed.value["run"] == "x-run"]
    assert len(row) == 1 and row["images"].isna().all()
    runs_picker(at).set_value("x-run").run()
    at.button(key="delete-ask").click().run()
    no_traceback(at)
    (warning,) = at.warning
    assert "This removes its images, 2 stored predictions of 1 model and every other file in" in warning.value
    at.button(key="delete-confirm").click().run()
    no_traceback(at)
    assert run_ids(home) == ["sample"] and not x.path.exists()
    assert any("(x-run) deleted with its images." in m.value for m in [*at.success, *at.info, *at.toast])
