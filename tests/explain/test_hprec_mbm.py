"""hprec_at_5 against Making Better Mistakes' own code (issue 22 item 24).

MBM's better_mistakes/model/run_xent.py (fiveai/making-better-mistakes) computes, per batch of
opts.batch_size images (default 256, drop_last=True),

    topK_hsimilarity = 1 - topK_hdist / max_dist                     # batch_size x k
    best_hier_similarities[c, :] = 1 - np.sort(distance_matrix[c, :]) / max_dist   # every class c
    topK_AP[k] = np.sum(topK_hsimilarity[:, :k]) / np.sum(best_hier_similarities[:, :k])

and reports the mean of topK_AP[5] over the batches: the denominator sums the best top-5 of every
class of the label space, not of the batch's images. WildLens's hprec_at_5 divides by the best top-5
of each image's own truth. The docs must say so and give the conversion, and the conversion must
equal MBM's literal formula on WildLens's own per-sample quantities."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.labels import get_label_space
from explain.metrics import compute_metric_tables, column_docs
from explain.similarity import label_space_matrices

IN1K = "imagenet-1k"


@pytest.fixture(scope="module")
def in1k():
    m = label_space_matrices(IN1K, cache_dir=False)
    return list(m.wnids), m.values.severity.astype(np.float64)


def _predictions(truth_codes, wnids, d, rng):
    """Top-5s of classes near the truth (so the precision is far from 0), distinct, in the space."""
    rows = []
    for i, g in enumerate(truth_codes):
        near = np.argsort(d[g], kind="stable")[:40]
        top = rng.choice(near, size=5, replace=False)
        rows.append({"model": "m", "image": f"i{i}.jpg", "true_wnid": wnids[g], "pred_wnid": wnids[top[0]],
                     **{f"pred_wnid_{k}": wnids[top[k - 1]] for k in range(2, 6)},
                     "label_space": IN1K, "status": "ok"})
    return pd.DataFrame(rows)


def _mbm_literal(df, wnids, d, batch_size):
    """run_xent.py's loop, line for line, on the stored rows in their order (DataLoader shuffle=False,
    drop_last=True). distances[(pred, truth)] is d(truth, pred) here: WildLens's severity."""
    index = {w: i for i, w in enumerate(wnids)}
    max_dist = d.max()
    best_hier_similarities = 1 - np.sort(d, axis=1) / max_dist
    columns = ["pred_wnid", "pred_wnid_2", "pred_wnid_3", "pred_wnid_4", "pred_wnid_5"]
    accum, logged = 0.0, 0
    for start in range(0, len(df) - batch_size + 1, batch_size):
        batch = df.iloc[start:start + batch_size]
        top_k_hdist = np.array([[d[index[t], index[p]] for p in preds]
                                for t, preds in zip(batch["true_wnid"], batch[columns].to_numpy())])
        top_k_hsimilarity = 1 - top_k_hdist / max_dist
        accum += np.sum(top_k_hsimilarity[:, :5]) / np.sum(best_hier_similarities[:, :5])
        logged += 1
    return accum / logged


def test_docs_state_the_formula_and_mbm_conversion():
    for table in ("per_model", "per_class"):
        _assert_doc(column_docs(table)["hprec_at_5"])
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "256/1000" in readme and "mbm_hprec_factor" in readme


def _assert_doc(doc):
    # what is computed, per image, and what MBM's code divides by instead
    for phrase in ("sum_i sum_{j=1..5} (1 - d(g_i, pred_ij) / D) / sum_i best(g_i)",
                   "best(c) = sum over the 5 classes nearest c", "run_xent.py", "per batch of B images",
                   "over all C classes of the label space", "B * mean_i best(g_i) / sum_c best(c)",
                   "256/1000", "explain.metrics.mbm_hprec_factor"):
        assert phrase in doc, phrase


@pytest.mark.parametrize("batch_size, balanced", [(256, False), (250, True)])
def test_mbm_literal_formula_equals_the_stated_conversion(in1k, batch_size, balanced):
    wnids, d = in1k
    rng = np.random.default_rng(24)
    if balanced:  # every class once: MBM's number is hprec_at_5 * B / C exactly
        truths = rng.permutation(len(wnids))
    else:  # two batches of a few classes: the class mix matters
        truths = rng.choice(rng.choice(len(wnids), 30, replace=False), size=2 * batch_size)
    df = _predictions(truths, wnids, d, rng)
    hprec = compute_metric_tables(df, cache_dir=False).per_model.set_index("model").loc["m", "hprec_at_5"]
    mbm = _mbm_literal(df, wnids, d, batch_size)
    assert abs(mbm - hprec) > 0.1  # "MBM's code" is not this column's number
    from explain.metrics import mbm_hprec_factor

    factor = mbm_hprec_factor(df["true_wnid"], batch_size=batch_size, cache_dir=False)
    assert mbm == pytest.approx(hprec * factor, rel=1e-12)
    if balanced:
        assert factor == pytest.approx(batch_size / len(wnids), rel=1e-12)
        assert mbm == pytest.approx(hprec * 250 / 1000, rel=1e-12)
    else:
        assert abs(factor - batch_size / len(wnids)) > 1e-3  # not B/C: the stated general form is needed
    assert len(get_label_space(IN1K).wnids) == 1000


def test_mbm_factor_defaults_to_mbm_batch_size(in1k):
    from explain.metrics import mbm_hprec_factor

    wnids, _ = in1k
    assert mbm_hprec_factor(wnids, cache_dir=False) == pytest.approx(256 / 1000, rel=1e-12)
    with pytest.raises(ValueError, match="outside imagenet-1k"):
        mbm_hprec_factor(["n07929519"], cache_dir=False)  # coffee: an ImageNet-21k class only
