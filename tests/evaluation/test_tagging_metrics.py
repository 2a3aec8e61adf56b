"""tagging_metrics / extract_entities checked against seqeval 1.2.2 (default, non-strict mode), and
tags_from_wordpieces against TaggingReader rows of the hand-written CoNLL fixture."""

import json
import os
import warnings

import numpy as np
import pytest
from seqeval import metrics as sq
from seqeval.metrics.sequence_labeling import get_entities

from keras_bert_impl.evaluation import extract_entities, tagging_metrics, tags_from_wordpieces

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NER = os.path.join(TESTS, "fixtures", "readers", "ner_train.conll")
VOCAB = os.path.join(os.path.dirname(TESTS), "data", "minilm", "vocab.txt")

# Hand-made sequences, many ill-formed, each a case conlleval/seqeval resolve in a particular way.
HAND_MADE = [
    ["B-PER", "I-PER", "O", "B-LOC"],
    ["I-PER", "I-PER", "O"],  # I- without B- starts a chunk
    ["B-PER", "I-LOC", "I-LOC", "O"],  # a type switch inside ends one chunk, starts another
    ["B-PER", "E-PER", "I-PER", "E-PER"],  # I- after E- starts a new chunk
    ["S-PER", "I-PER", "E-PER"],
    ["E-PER", "E-PER", "S-LOC", "S-LOC"],
    ["B-PER", "B-PER", "I-PER"],
    ["I-PER", "B-PER", "S-LOC", "E-LOC", "O", "E-ORG", "I-ORG"],
    ["B-ORG", "S-ORG", "I-ORG", "B-ORG", "E-LOC"],
    ["O", "O", "O"],
    [],
    ["B-GEO-LOC", "I-GEO-LOC", "I-GEO", "E-GEO"],  # types holding a hyphen
    ["I-MISC"],
    ["E-MISC", "O", "B-MISC"],
]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on undefined metrics even with zero_division=0
        return fn(*args, **kwargs)


def _random_sentences(rng, n, types=("PER", "LOC", "ORG"), prefixes=("B", "I", "E", "S", "O")):
    sentences = []
    for _ in range(n):
        length = int(rng.integers(0, 12))
        tags = []
        for _ in range(length):
            prefix = prefixes[rng.integers(len(prefixes))]
            tags.append("O" if prefix == "O" else f"{prefix}-{types[rng.integers(len(types))]}")
        sentences.append(tags)
    return sentences


def _assert_matches_seqeval(result, gold, predicted):
    kw = dict(zero_division=0)
    assert result["token_accuracy"] == pytest.approx(sq.accuracy_score(gold, predicted), abs=1e-12)
    assert result["entity_precision"] == pytest.approx(
        _quiet(sq.precision_score, gold, predicted, **kw), abs=1e-12
    )
    assert result["entity_recall"] == pytest.approx(_quiet(sq.recall_score, gold, predicted, **kw), abs=1e-12)
    assert result["entity_f1"] == pytest.approx(_quiet(sq.f1_score, gold, predicted, **kw), abs=1e-12)
    report = _quiet(sq.classification_report, gold, predicted, output_dict=True, **kw)
    types = sorted(k for k in report if not k.endswith(" avg"))
    assert list(result["per_type"]) == types
    for name in types:
        ours, theirs = result["per_type"][name], report[name]
        assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx(
            (theirs["precision"], theirs["recall"], theirs["f1-score"]), abs=1e-12
        )
        assert ours["support"] == theirs["support"]
    assert result["num_gold_entities"] == sum(len(get_entities(s)) for s in gold)
    assert result["num_predicted_entities"] == sum(len(get_entities(s)) for s in predicted)


@pytest.mark.parametrize("tags", HAND_MADE)
def test_entities_equal_seqeval_on_hand_made_sequences(tags):
    assert extract_entities(tags) == [tuple(c) for c in get_entities(tags)]


def test_entities_equal_seqeval_on_random_sequences():
    rng = np.random.default_rng(0)
    for prefixes in (("B", "I", "E", "S", "O"), ("B", "I", "O"), ("I", "O")):  # IOBES-like, IOB2, IOB1
        for tags in _random_sentences(rng, 500, prefixes=prefixes):
            assert extract_entities(tags) == [tuple(c) for c in get_entities(tags)], tags


def test_metrics_equal_seqeval_on_hand_made_pairs():
    gold = HAND_MADE
    predicted = [list(reversed(s)) for s in HAND_MADE]  # same lengths, different chunks
    _assert_matches_seqeval(tagging_metrics(gold, predicted), gold, predicted)
    perfect = tagging_metrics(gold, gold)
    assert perfect["entity_f1"] == perfect["token_accuracy"] == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_metrics_equal_seqeval_on_random_corpora(seed):
    rng = np.random.default_rng(seed)
    gold = _random_sentences(rng, 200)
    # Predictions: the gold with a share of tags replaced, so there are hits, misses and spurious chunks.
    predicted = []
    for sentence in gold:
        other = _random_sentences(rng, 1)[0] + ["O"] * len(sentence)
        predicted.append([o if rng.random() < 0.3 else g for g, o in zip(sentence, other)])
    result = tagging_metrics(gold, predicted)
    assert result["num_sentences"] == 200 and result["num_tokens"] == sum(map(len, gold))
    _assert_matches_seqeval(result, gold, predicted)
    assert json.loads(json.dumps(result)) == result


def test_entities_do_not_cross_sentences():
    # One chunk per sentence, though the second sentence starts
    # with I-PER right after the first ends with I-PER.
    gold = [["B-PER", "I-PER"], ["I-PER", "O"]]
    result = tagging_metrics(gold, [["B-PER", "I-PER"], ["O", "O"]])
    assert result["num_gold_entities"] == 2 and result["entity_recall"] == 0.5
    _assert_matches_seqeval(result, gold, [["B-PER", "I-PER"], ["O", "O"]])


def test_no_entities_anywhere_scores_zero_like_seqeval():
    result = tagging_metrics([["O", "O"]], [["O", "O"]])
    assert result["token_accuracy"] == 1.0
    assert result["entity_f1"] == 0.0 and result["per_type"] == {} and result["num_gold_entities"] == 0
    assert _quiet(sq.f1_score, [["O", "O"]], [["O", "O"]], zero_division=0) == 0.0


def test_part_of_speech_tags_skip_entity_metrics():
    gold, predicted = [["NNP", "VBZ", "."], ["DT", "NN"]], [["NNP", "VBD", "."], ["DT", "NN"]]
    result = tagging_metrics(gold, predicted)
    assert result == {"num_sentences": 2, "num_tokens": 5, "token_accuracy": 0.8}
    assert result["token_accuracy"] == sq.accuracy_score(gold, predicted)
    with pytest.raises(ValueError, match="entity tags must be.*'NNP'"):
        tagging_metrics(gold, predicted, entities=True)
    assert "entity_f1" not in tagging_metrics([["B-PER"]], [["B-PER"]], entities=False)


@pytest.mark.parametrize(
    "gold, predicted, kwargs, message",
    [
        ([["B-PER", "O"]], [["B-PER"]], {}, "sentence 0 has 2 gold tags but 1 predicted"),
        ([["B-PER"], ["O"]], [["B-PER"]], {}, "same number of sentences. Received: 2 and 1"),
        (["B-PER", "O"], ["B-PER", "O"], {}, r"item 0 is the string 'B-PER'.*wrap it"),
        ("B-PER", "B-PER", {}, "list of sentences"),
        ([[1, 2]], [[1, 2]], {}, "tag strings.*tags_from_wordpieces"),
        ([["B-PER", "MISC"]], [["B-PER", "O"]], {}, "entity tags must be.*'MISC'"),
        ([["U-PER", "O"]], [["S-PER", "O"]], {}, "BILOU"),
        ([["B-", "O"]], [["B-PER", "O"]], {}, "'B-'"),
        ([[], []], [[], []], {}, "at least one tagged word"),
        ([["O"]], [["O"]], {"entities": "yes"}, "entities='yes'"),
    ],
)
def test_bad_inputs(gold, predicted, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tagging_metrics(gold, predicted, **kwargs)


def test_extract_entities_rejects_non_entity_tags():
    with pytest.raises(ValueError, match="'L-PER'.*U- -> S-, L- -> E-"):
        extract_entities(["B-PER", "L-PER"])


# -- tags_from_wordpieces --------------------------------------------------------


def test_tags_from_wordpieces_by_hand():
    labels = ["O", "B-PER", "I-PER"]
    # [CLS] Guil ##laume Fa ##ury told [SEP] [PAD]: three words, tags on their first pieces.
    label_ids = [[0, 1, 0, 2, 0, 0, 0, 0]]
    weights = [[0, 1, 0, 1, 0, 1, 0, 0]]
    # The prediction on a word's later pieces (and on [CLS]/[SEP]/padding) does not count.
    predicted = [[2, 1, 0, 1, 2, 0, 1, 2]]
    gold, pred = tags_from_wordpieces(label_ids, predicted, weights, labels)
    assert gold == [["B-PER", "I-PER", "O"]] and pred == [["B-PER", "B-PER", "O"]]
    logits = np.eye(3)[np.array(predicted)] * 5.0  # [1, 8, 3]
    assert tags_from_wordpieces(np.array(label_ids), logits, np.array(weights, np.float32), labels) == (
        gold,
        pred,
    )
    # Rows of different lengths (per-batch padding).
    gold, pred = tags_from_wordpieces([[0, 1, 0], [0, 2]], [[0, 1, 0], [0, 0]], [[0, 1, 0], [0, 1]], labels)
    assert gold == [["B-PER"], ["I-PER"]] and pred == [["B-PER"], ["O"]]


@pytest.mark.parametrize(
    "args, message",
    [
        (([[0, 1]], [[0, 1]], [[0, 1]], "O"), "tag vocabulary"),
        (([[0, 1]], [[0, 1]], [[0, 1], [0, 1]], ["O", "B-PER"]), "1, 1 and 2 rows"),
        (([[0, 1]], [[0, 1, 0]], [[0, 1]], ["O", "B-PER"]), "lengths 2, 3 and 2"),
        (
            ([[0, 5]], [[0, 1]], [[0, 1]], ["O", "B-PER"]),
            r"label_ids\[0\] \(where sample_weight > 0\).*\[5\]",
        ),
        (([[0, 1]], [[0, 7]], [[0, 1]], ["O", "B-PER"]), r"predictions\[0\].*\[7\]"),
        (([[0, 1]], np.zeros((1, 2, 3)), [[0, 1]], ["O", "B-PER"]), "scores for 3 tags but labels has 2"),
        (([[0, 1]], [[0, 1]], [[0, -1]], ["O", "B-PER"]), ">= 0"),
        ((np.array([0, 1]), [[0, 1]], [[0, 1]], ["O", "B-PER"]), "one row per sentence"),
    ],
)
def test_tags_from_wordpieces_bad_inputs(args, message):
    with pytest.raises(ValueError, match=message):
        tags_from_wordpieces(*args)


def _conll_tags(path):
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            columns = line.split()
            if not columns:
                if current:
                    sentences.append(current)
                current = []
            elif columns[0] != "-DOCSTART-":
                current.append(columns[-1])
    if current:
        sentences.append(current)
    return sentences


@pytest.mark.parametrize("sequence_length", [64, 12])
def test_tags_from_wordpieces_on_tagging_reader_rows(sequence_length):
    if not os.path.exists(VOCAB):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    from keras_bert_impl.data.readers import TaggingReader
    from keras_bert_impl.tokenization import BertPreprocessor

    reader = TaggingReader(BertPreprocessor(VOCAB, sequence_length=sequence_length), batch_size=2)
    batches = list(reader.read(NER))
    label_ids = np.concatenate([y.numpy() for _, y, _ in batches])
    weights = np.concatenate([w.numpy() for _, _, w in batches])
    expected = _conll_tags(NER)
    # A perfect tagger, except on the pieces that carry no word: those must not matter.
    rng = np.random.default_rng(0)
    predicted = np.where(weights > 0, label_ids, rng.integers(0, len(reader.labels), label_ids.shape))
    gold, pred = tags_from_wordpieces(label_ids, predicted, weights, reader.labels)
    assert pred == gold and len(gold) == len(expected)
    for got, want in zip(gold, expected):
        assert got == want[: len(got)]  # whole sentences, or the words that fit before the cut
    lost = sum(len(w) for w in expected) - sum(len(g) for g in gold)
    assert lost == reader.report.counters["truncated_words"]
    assert (lost > 0) == (sequence_length == 12)
    result = tagging_metrics(gold, pred)
    assert result["token_accuracy"] == result["entity_f1"] == 1.0
