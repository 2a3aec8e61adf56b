"""classification_metrics and multilabel_metrics checked against scikit-learn (zero_division=0) on
random and edge-case inputs."""

import json

import numpy as np
import pytest
from sklearn import metrics as skm

from keras_bert_impl.evaluation import classification_metrics, multilabel_metrics


def _assert_matches_sklearn(result, labels, predicted, classes):
    """classes: the per_class order; sklearn's macro averages run over its default labels (those seen)."""
    assert result["accuracy"] == pytest.approx(skm.accuracy_score(labels, predicted), abs=1e-12)
    for average in ("macro", "weighted"):
        p, r, f, _ = skm.precision_recall_fscore_support(labels, predicted, average=average, zero_division=0)
        assert result[f"{average}_f1"] == pytest.approx(f, abs=1e-12)
        if average == "macro":
            assert result["macro_precision"] == pytest.approx(p, abs=1e-12)
            assert result["macro_recall"] == pytest.approx(r, abs=1e-12)
    p, r, f, s = skm.precision_recall_fscore_support(
        labels, predicted, labels=classes, average=None, zero_division=0
    )
    per_class = list(result["per_class"].values())
    np.testing.assert_allclose([c["precision"] for c in per_class], p, atol=1e-12)
    np.testing.assert_allclose([c["recall"] for c in per_class], r, atol=1e-12)
    np.testing.assert_allclose([c["f1"] for c in per_class], f, atol=1e-12)
    np.testing.assert_array_equal([c["support"] for c in per_class], s)
    np.testing.assert_array_equal(
        [c["predicted"] for c in per_class], np.bincount(predicted, minlength=len(classes))
    )


@pytest.mark.parametrize("seed", range(20))
def test_random_ids_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    num_classes = int(rng.integers(2, 9))
    n = int(rng.integers(1, 60))
    labels = rng.integers(0, num_classes, n)
    # Skewed predictions so some classes are never predicted, some never present.
    predicted = np.where(rng.random(n) < 0.5, labels, rng.integers(0, max(1, num_classes - 2), n))
    result = classification_metrics(labels, predicted, num_classes=num_classes)
    assert result["num_examples"] == n
    _assert_matches_sklearn(result, labels, predicted, list(range(num_classes)))


@pytest.mark.parametrize("seed", range(5))
def test_logits_take_the_argmax(seed):
    rng = np.random.default_rng(100 + seed)
    logits = rng.normal(size=(40, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 40)
    names = ["a", "b", "c", "d", "e"]
    from_logits = classification_metrics(labels, logits, label_names=names)
    assert from_logits == classification_metrics(labels, logits.argmax(1), label_names=names)
    assert list(from_logits["per_class"]) == names
    _assert_matches_sklearn(from_logits, labels, logits.argmax(1), list(range(5)))


def test_class_never_predicted_scores_zero_like_sklearn():
    labels = np.array([0, 0, 1, 1, 2, 2])
    predicted = np.array([0, 0, 1, 1, 1, 0])  # class 2 never predicted
    result = classification_metrics(labels, predicted)
    assert result["per_class"]["2"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 2,
        "predicted": 0,
    }
    _assert_matches_sklearn(result, labels, predicted, [0, 1, 2])
    # The macro average counts it: (0.8 + 0.8 + 0) / 3 for F1.
    assert result["macro_f1"] == pytest.approx((0.8 + 0.8 + 0.0) / 3)


def test_class_never_present_and_never_predicted_is_listed_but_not_averaged():
    labels, predicted = [0, 1, 1, 0], [0, 1, 0, 0]
    result = classification_metrics(labels, predicted, num_classes=4)
    assert result["per_class"]["3"]["support"] == 0 and result["per_class"]["3"]["f1"] == 0.0
    # scikit-learn's default labels are those in y_true or y_pred: classes 0 and 1 only.
    assert result["macro_f1"] == pytest.approx(
        skm.f1_score(labels, predicted, average="macro", zero_division=0)
    )
    assert result["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2)


def test_predicted_but_absent_class_has_zero_recall_and_counts():
    labels, predicted = [0, 0, 0], [0, 2, 0]
    result = classification_metrics(labels, predicted, num_classes=3)
    assert result["per_class"]["2"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 0,
        "predicted": 1,
    }
    _assert_matches_sklearn(result, labels, predicted, [0, 1, 2])


def test_perfect_and_single_example():
    assert classification_metrics([2], [2])["macro_f1"] == 1.0
    result = classification_metrics([0, 1, 2], np.eye(3))
    assert result["accuracy"] == result["macro_f1"] == result["weighted_f1"] == 1.0


def test_float_ids_from_json_are_accepted_and_result_is_json():
    result = classification_metrics([0.0, 1.0, 1.0], [0.0, 1.0, 0.0], label_names=["neg", "pos"])
    assert json.loads(json.dumps(result)) == result
    assert all(type(v) in (int, float) for k, v in result.items() if k != "per_class")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(labels=[0, 1], predictions=[0]), "2 labels and 1 predictions"),
        (dict(labels=[], predictions=[]), "at least one example"),
        (dict(labels=[0, 3], predictions=[0, 1], num_classes=3), r"\[0, 3\).*\[3\]"),
        (dict(labels=[0, -1], predictions=[0, 1]), "out-of-range ids"),
        (dict(labels=[0, 1], predictions=[0.5, 0.2]), "not whole numbers: \\[0.5, 0.2\\]"),
        (dict(labels=[[0, 1]], predictions=[0, 1]), "labels must be 1-D"),
        (dict(labels=[0, 1], predictions=np.zeros((2, 3)), num_classes=4), "predictions.shape\\[1\\]=3"),
        (dict(labels=[0, 1], predictions=[0, 1], label_names=["a"]), r"\[0, 1\).*\[1\].*or label_names"),
        (
            dict(labels=[0, 1], predictions=[0, 1], num_classes=2, label_names=["a"]),
            "num_classes=2, len\\(label_names\\)=1",
        ),
        (dict(labels=[0, 1], predictions=[0, 1], label_names="ab"), "not one string"),
        (dict(labels=[0, 1], predictions=[0, 1], num_classes=0), "num_classes=0"),
        (dict(labels=[0, 1], predictions=np.zeros((2, 2, 2))), "predictions with shape \\(2, 2, 2\\)"),
        (dict(labels=[0, 1], predictions=[[0.1, np.nan], [1.0, 0.0]]), "finite"),
    ],
)
def test_bad_inputs_say_what_and_how(kwargs, message):
    with pytest.raises(ValueError, match=message):
        classification_metrics(**kwargs)


# -- multi-label ---------------------------------------------------------------


def _assert_multilabel_matches_sklearn(result, targets, predicted):
    assert result["exact_match"] == pytest.approx(skm.accuracy_score(targets, predicted), abs=1e-12)
    assert result["label_accuracy"] == pytest.approx(1 - skm.hamming_loss(targets, predicted), abs=1e-12)
    p, r, f, _ = skm.precision_recall_fscore_support(targets, predicted, average="micro", zero_division=0)
    assert (result["micro_precision"], result["micro_recall"], result["micro_f1"]) == pytest.approx(
        (p, r, f), abs=1e-12
    )
    assert result["macro_f1"] == pytest.approx(
        skm.f1_score(targets, predicted, average="macro", zero_division=0), abs=1e-12
    )
    p, r, f, s = skm.precision_recall_fscore_support(targets, predicted, average=None, zero_division=0)
    per_label = list(result["per_label"].values())
    np.testing.assert_allclose([c["precision"] for c in per_label], p, atol=1e-12)
    np.testing.assert_allclose([c["recall"] for c in per_label], r, atol=1e-12)
    np.testing.assert_allclose([c["f1"] for c in per_label], f, atol=1e-12)
    np.testing.assert_array_equal([c["support"] for c in per_label], s)


@pytest.mark.parametrize("seed", range(20))
def test_multilabel_random_logits_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    # C >= 2: scikit-learn reads a single column as a binary target, not multi-label.
    n, c = int(rng.integers(1, 50)), int(rng.integers(2, 8))
    targets = (rng.random((n, c)) < rng.random(c)).astype(np.int32)  # some labels never on
    logits = rng.normal(size=(n, c)) * 3 + np.where(targets == 1, 1.0, -1.0)
    threshold = float(rng.uniform(0.1, 0.9))
    result = multilabel_metrics(targets, logits, threshold=threshold, from_logits=True)
    predicted = (1 / (1 + np.exp(-logits)) > threshold).astype(np.int32)
    assert result["num_examples"] == n and result["num_labels"] == c
    _assert_multilabel_matches_sklearn(result, targets, predicted)
    # The same decisions from probabilities.
    assert multilabel_metrics(targets, 1 / (1 + np.exp(-logits)), threshold=threshold) == result


def test_multilabel_single_label_is_binary_f1():
    targets, probabilities = np.array([[1], [0], [1], [1]]), np.array([[0.9], [0.7], [0.2], [0.6]])
    result = multilabel_metrics(targets, probabilities)
    p, r, f, _ = skm.precision_recall_fscore_support(
        targets[:, 0], probabilities[:, 0] > 0.5, average="binary"
    )
    assert (result["micro_precision"], result["micro_recall"], result["micro_f1"]) == pytest.approx((p, r, f))
    assert result["macro_f1"] == pytest.approx(f) and result["exact_match"] == 0.5


def test_multilabel_label_never_predicted_or_never_present():
    targets = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0]])
    probabilities = np.array(
        [[0.9, 0.1, 0.0], [0.8, 0.2, 0.3], [0.2, 0.4, 0.1]]
    )  # label 1 never predicted, label 2 absent
    result = multilabel_metrics(targets, probabilities, label_names=["sports", "politics", "tech"])
    assert result["per_label"]["politics"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 2,
        "predicted": 0,
    }
    assert result["per_label"]["tech"] == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 0,
        "predicted": 0,
    }
    # scikit-learn's multi-label macro average counts every column, absent ones as 0.
    assert result["macro_f1"] == pytest.approx(1 / 3)
    _assert_multilabel_matches_sklearn(result, targets, (probabilities > 0.5).astype(int))


def test_multilabel_threshold_is_strict_and_huge_logits_are_fine():
    result = multilabel_metrics([[1, 0]], [[0.5, 0.5]], threshold=0.5)
    assert result["per_label"]["0"]["predicted"] == 0  # 0.5 is not above 0.5
    result = multilabel_metrics([[1, 0, 1]], [[1e4, -1e4, 800.0]], from_logits=True)
    assert result["exact_match"] == 1.0 and json.loads(json.dumps(result)) == result


def test_multilabel_bool_and_float_targets():
    scores = [[0.7, 0.2], [0.1, 0.6]]
    assert multilabel_metrics([[True, False], [False, True]], scores) == multilabel_metrics(
        [[1.0, 0.0], [0.0, 1.0]], scores
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2, 0.3]]), r"\(1, 2\), scores \(1, 3\)"),
        (dict(targets=[1, 0], scores=[0.1, 0.2]), "targets must be multi-hot \\[N, C\\]"),
        (dict(targets=[[1, 2]], scores=[[0.1, 0.2]]), "only 0 and 1.*\\[2.0\\]"),
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2]], threshold=1.0), "threshold=1.0"),
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2]], threshold=0), "threshold=0"),
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2]], threshold=True), "threshold=True"),
        (dict(targets=[[1, 0]], scores=[[2.5, -1.0]]), "from_logits=True"),
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2]], from_logits="yes"), "from_logits='yes'"),
        (dict(targets=[[1, 0]], scores=[[0.1, 0.2]], label_names=["a", "a"]), "distinct"),
        (dict(targets=np.zeros((0, 2)), scores=np.zeros((0, 2))), "at least one example"),
    ],
)
def test_multilabel_bad_inputs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        multilabel_metrics(**kwargs)
