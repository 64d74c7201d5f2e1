"""Issue 12 point 6: Confusions and Explain state each confusion's lowest common subsumer and how
far up it is (explain.vocabulary.lcs_phrase), and say the related/distant threshold on hover."""
from explain import vocabulary
from explain.explanations import confusion_lcs_phrase
from tests.pages.test_app import open_page


def test_confusions_and_explain_state_the_common_ancestor(app):
    at = open_page(app, "confusions")
    assert not at.exception
    phrases = [c.value.removeprefix("Common ancestor: ") for c in at.caption if c.value.startswith("Common ancestor: ")]
    if not phrases:
        import pytest

        pytest.skip("the default model made no mistake on the sample")
    assert phrases and all(p.startswith("both ") and (" up from " in p or "itself" in p) for p in phrases)
    explain = [link.proto for link in at.main.get("page_link") if link.proto.label.startswith("Explain ")][0]
    at.query_params.clear()  # follow the link as the browser does: its URL, then the page
    at.query_params.update(dict(part.split("=", 1) for part in explain.query_string.split("&")))
    at.switch_page("pages/explain_page.py").run()
    assert not at.exception
    model, true_wnid, pred_wnid = at.session_state["pair"]
    confused = [s for s in at.selectbox if s.label == "Confused with"][0]
    assert "MF (misclassification frequency)" in confused.help, "MF is said where its options first show it"
    from explain.explanations import explain_pair

    truth = explain_pair(true_wnid, pred_wnid)
    texts = [m.value for m in at.markdown]
    assert any(truth.lcs_phrase().split(", ")[0] in t for t in texts), texts
    assert str(vocabulary.RELATED_MAX_SEVERITY) in vocabulary.relation_help(markdown=False)
    assert confusion_lcs_phrase(true_wnid, truth.lcs_wnid, "x").endswith(" up from x") or truth.lcs_steps == 0
