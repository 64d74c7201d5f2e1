"""The probe's solver against scikit-learn's LogisticRegression, and the search of C."""
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from probe.fewshot import draw
from probe.linear import C_GRID, DEFAULT_C, SoftmaxProbe, l2_normalise, search_probe
from tests.probe.synthetic import blobs


@pytest.mark.parametrize("C", [0.1, 10.0, 1000.0])
def test_probe_equals_sklearn_logistic_regression_on_the_same_split(C):
    """Separable synthetic set, one few-shot split, fixed C: the same predictions, accuracy and
    (to solver tolerance) probabilities as LogisticRegression(C, lbfgs, multinomial) on the
    L2-normalised features."""
    x, labels = blobs(30, n_classes=5, dim=24, spread=0.3, seed=3)
    d = draw(labels, sorted(set(labels)), 8, seed=22)
    ours = SoftmaxProbe(C=C, dtype="float64", tol=1e-8).fit(x[d.train], labels[d.train])
    ref = LogisticRegression(C=C, tol=1e-8, max_iter=5000).fit(l2_normalise(x[d.train]), labels[d.train])
    test = x[d.test]
    assert list(ours.classes_) == list(ref.classes_)
    np.testing.assert_array_equal(ours.predict(test), ref.predict(l2_normalise(test)))
    assert ours.score(test, labels[d.test]) == ref.score(l2_normalise(test), labels[d.test])
    assert ours.score(test, labels[d.test]) > 0.95  # separable: the comparison is not between two failures
    np.testing.assert_allclose(ours.predict_proba(test), ref.predict_proba(l2_normalise(test)), atol=1e-4)
    # the default float32 products change nothing a probe reports
    fast = SoftmaxProbe(C=C).fit(x[d.train], labels[d.train])
    np.testing.assert_array_equal(fast.predict(test), ref.predict(l2_normalise(test)))


def test_features_are_l2_normalised_inside_the_probe():
    x, labels = blobs(10, n_classes=3, dim=8, seed=1)
    scaled = x * np.random.default_rng(0).uniform(0.1, 50, size=(len(x), 1)).astype(np.float32)
    a = SoftmaxProbe(C=10).fit(x, labels)
    b = SoftmaxProbe(C=10).fit(scaled, labels)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-5)


def test_fits_are_deterministic():
    x, labels = blobs(12, n_classes=4, dim=32, spread=1.0, seed=2)
    a = SoftmaxProbe(C=100).fit(x, labels)
    b = SoftmaxProbe(C=100).fit(x, labels)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)


def test_a_prior_head_is_the_zero_shot_classifier_when_c_is_tiny():
    """The language-initialised variant: the L2 penalty pulls towards W0; with no trust in the
    shots (C -> 0) the probe predicts what W0 predicts, with C large it learns from the shots."""
    x, labels = blobs(20, n_classes=4, dim=16, spread=0.5, seed=4)
    classes = np.array(sorted(set(labels)))
    rng = np.random.default_rng(0)
    prior = 30 * rng.normal(size=(4, 16))  # a "text classifier" unrelated to the clusters
    tiny = SoftmaxProbe(C=1e-8, classes=classes, prior_coef=prior, fit_intercept=False).fit(x, labels)
    zero_shot = classes[np.argmax(l2_normalise(x) @ prior.T, axis=1)]
    np.testing.assert_array_equal(tiny.predict(x), zero_shot)
    big = SoftmaxProbe(C=1e4, classes=classes, prior_coef=prior, fit_intercept=False).fit(x, labels)
    assert big.score(x, labels) > 0.95
    with pytest.raises(ValueError, match="classes"):
        SoftmaxProbe(prior_coef=prior).fit(x, labels)


def test_classes_fix_the_probability_columns():
    x, labels = blobs(5, n_classes=3, dim=8, seed=5)
    classes = np.array(sorted(set(labels)))
    seen = labels != classes[2]
    probe = SoftmaxProbe(C=10, classes=classes).fit(x[seen], labels[seen])
    assert probe.predict_proba(x).shape == (len(x), 3)


def test_search_validates_on_the_split_and_refits_on_all_shots():
    x, labels = blobs(20, n_classes=4, dim=16, spread=0.8, seed=6)
    classes = sorted(set(labels))
    d = draw(labels, classes, 10, seed=37)
    result = search_probe(x[d.train], labels[d.train], d.val_mask, classes)
    assert result.hp_source == "validated" and result.C in C_GRID and 0 <= result.val_top1 <= 1
    refit = SoftmaxProbe(C=result.C, classes=np.array(classes)).fit(x[d.train], labels[d.train])
    np.testing.assert_array_equal(result.estimator.coef_, refit.coef_)  # refitted on train + validation
    # no validation image (N = 1): the grid's centre, said so
    d1 = draw(labels, classes, 1, seed=37)
    assert not d1.val_mask.any()
    one = search_probe(x[d1.train], labels[d1.train], d1.val_mask, classes)
    assert (one.hp_source, one.C, one.val_top1) == ("default", DEFAULT_C, None)
    assert DEFAULT_C == 10.0 and C_GRID[0] == 0.01 and C_GRID[-1] == 1e4
