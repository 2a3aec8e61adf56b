"""TFLite metadata for MediaPipe Tasks (keras_bert_impl_export.tflite_metadata), checked in
MediaPipe itself: its TextClassifier and TextEmbedder load our .tflite files unchanged and
agree with the Python pipeline on real MR sentences with the real all-MiniLM-L6-v2.

MediaPipe runs in its own venv (`make mediapipe-venv`; the tests build it through make) and
is driven by tests/export/mediapipe_client.py, which prints JSON.

MediaPipe tokenizes with its own BERT tokenizer, not ours, so its ids are measured, not
assumed: an "ids probe" .tflite, given the same metadata, outputs its three int32 inputs as
floats, and MediaPipe's TextEmbedder hands back exactly the ids, mask and segment ids its
preprocessor fed the model. The classifier and embedder are then compared with Keras on our
ids where MediaPipe's equal ours, and with Keras on MediaPipe's own ids where they differ.
"""

import csv
import io
import json
import os
import subprocess
import unicodedata
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

import keras_bert_impl as kb
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl_export.tflite_metadata import add_metadata, read_metadata
from tests.harness import random_inputs, tiny_backbone_config
from tests.run_once import make_target

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")
MR = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")
CLIENT = os.path.join(REPO, "tests", "export", "mediapipe_client.py")
MEDIAPIPE_PYTHON = os.path.join(REPO, ".venv-mediapipe", "bin", "python")
INPUT_NAMES = ("ids", "mask", "segment_ids")
LENGTH = 64  # 5 of the 4,000 MR sentences are longer: truncation is compared too
LABELS = ["negative", "positive"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    f"w{i}" for i in range(115)
]  # the tiny models'
# The classifier's and embedder's sentences: every 13th MR sentence (300 of 4,000, both
# classes, file order); the classifier's head is fitted on 103 others (every 39th from the second).
SAMPLE = slice(0, 3900, 13)
HEAD_FIT = slice(1, 4000, 39)
# MediaPipe's own tokenizer gives other ids than ours (Google's BERT tokenization) on these
# many of the 4,000 MR sentences, measured with the ids probe: each holds an accented letter,
# which BERT's uncased normalisation strips and MediaPipe keeps.
MR_ID_MISMATCHES = 49


def tflite_from_keras(model, output_key, length, workdir, input_names=INPUT_NAMES):
    """A TFLite flatbuffer of `model` the way MediaPipe wants it (what the exporter hands
    add_metadata): builtin ops, one serving_default signature of int32 [1, length] inputs
    named `input_names` (fed to token_ids, padding_mask, segment_ids), and the model's one
    float32 output `output_key`."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    spec = [tf.TensorSpec([1, length], tf.int32, name=name) for name in input_names]

    @tf.function(input_signature=spec)
    def serve(*inputs):
        ids, mask, segment_ids = inputs
        outputs = model({"token_ids": ids, "padding_mask": mask, "segment_ids": segment_ids}, training=False)
        return {output_key: outputs[output_key]}

    archive.add_endpoint("serving_default", serve)
    path = os.path.join(str(workdir), f"{model.name}_{'_'.join(input_names)}_{length}")
    archive.write_out(path, verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(path)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def ids_probe(length):
    """A model whose "embeddings" are its own inputs: [ids | mask | segment ids] as float32."""
    names = ("token_ids", "padding_mask", "segment_ids")
    inputs = {name: keras.Input((length,), batch_size=1, dtype="int32", name=name) for name in names}
    flat = keras.ops.concatenate([keras.ops.cast(inputs[name], "float32") for name in names], axis=-1)
    return keras.Model(inputs, {"embeddings": flat}, name="ids_probe")


def strip_accents(text):
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def run_mediapipe(tmp_path, sentences, classify=(), embed=(), metadata=()):
    path = tmp_path / "sentences.json"
    path.write_text(json.dumps(sentences), encoding="utf-8")
    command = [MEDIAPIPE_PYTHON, CLIENT, "--sentences", str(path)]
    for flag, models in (("--classify", classify), ("--embed", embed), ("--metadata", metadata)):
        for model in models:
            command += [flag, str(model)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["tensorflow_imported"] is False
    return result


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mediapipe_venv():
    """The MediaPipe client venv, built (or found up to date) by the Makefile target."""
    error = make_target("mediapipe-venv")
    if error:
        pytest.fail(error)
    return MEDIAPIPE_PYTHON


@pytest.fixture(scope="session")
def mr():
    """The 4,000 MR sentences as the file holds them (raw text, trailing space and newline
    included) and their labels (0 negative, 1 positive)."""
    with open(MR, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    return [text for _, text in rows], np.array([int(label == "1") for label, _ in rows])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny classifier (3 classes) and embedder (8 dimensions) as MediaPipe-shaped .tflite bytes."""
    workdir = str(tmp_path_factory.mktemp("tiny"))
    backbone = kb.BertBackbone(
        **tiny_backbone_config(vocabulary_size=len(VOCABULARY), max_sequence_length=32)
    )
    classifier = kb.BertClassifier(backbone, num_classes=3, activation="softmax", name="tiny_classifier")
    embedder = kb.BertEmbedder(backbone, name="tiny_embedder")
    return {
        "classifier": tflite_from_keras(classifier, "probabilities", 16, workdir),
        "embedder": tflite_from_keras(embedder, "embeddings", 16, workdir),
    }


# --- read_metadata round trip and bad arguments (tiny models) -----------------------------


@pytest.mark.slow  # about 20 s or more: converts to TFLite and writes its metadata
def test_round_trip(tiny):
    original = tiny["classifier"]
    arguments = dict(
        kind="classifier",
        vocabulary=VOCABULARY,
        lowercase=True,
        label_names=["a", "b", "c"],
        name="tiny",
        description="a tiny classifier",
        version="7",
    )
    tflite = add_metadata(original, **arguments)
    meta = read_metadata(tflite)
    assert (meta["name"], meta["description"], meta["version"]) == ("tiny", "a tiny classifier", "7")
    assert meta["kind"] == "classifier" and meta["min_parser_version"] == "1.1.0"
    # The converter's own entries stay beside ours.
    assert meta["model_metadata_entries"][-1] == "TFLITE_METADATA"
    assert "min_runtime_version" in meta["model_metadata_entries"]
    # One metadata entry per model input, in the subgraph's order, named by the signature.
    interpreter = Interpreter(model_content=tflite)
    assert [i["tensor"] for i in meta["inputs"]] == [d["name"] for d in interpreter.get_input_details()]
    assert sorted(i["name"] for i in meta["inputs"]) == ["ids", "mask", "segment_ids"]
    for entry in meta["inputs"]:
        assert entry["tensor"] == f"serving_default_{entry['name']}:0" and entry["shape"] == [1, 16]
    assert meta["input_process_units"] == [
        {
            "type": "BertTokenizerOptions",
            "vocab_files": [
                {
                    "name": "vocab.txt",
                    "description": meta["input_process_units"][0]["vocab_files"][0]["description"],
                    "type": "VOCABULARY",
                }
            ],
        }
    ]
    (output,) = meta["outputs"]
    assert output["name"] == "probabilities" and output["shape"] == [1, 3]
    assert output["stats"] == {"min": [0.0], "max": [1.0]} and output["content"] == "FeatureProperties"
    assert [(f["name"], f["type"]) for f in output["associated_files"]] == [
        ("labels.txt", "TENSOR_AXIS_LABELS")
    ]
    assert meta["vocabulary"] == VOCABULARY and meta["label_names"] == ["a", "b", "c"]
    with zipfile.ZipFile(io.BytesIO(tflite)) as z:
        assert {i.filename: i.compress_type for i in z.infolist()} == {"vocab.txt": 0, "labels.txt": 0}
        assert z.read("vocab.txt").decode() == "\n".join(VOCABULARY) + "\n"

    # The original bytes are inside, unchanged, moved by a multiple of 64 (weights keep their alignment).
    start = tflite.index(original)
    assert start % 64 == 0
    # Same inputs, same bytes; and LiteRT runs the model exactly as before.
    assert tflite == add_metadata(original, **arguments)
    x = random_inputs(batch=1, length=16, vocabulary_size=120, pad_last=5, seed=3)
    x = {"ids": x["token_ids"], "mask": x["padding_mask"], "segment_ids": x["segment_ids"]}
    before = Interpreter(model_content=original).get_signature_runner("serving_default")(**x)
    after = interpreter.get_signature_runner("serving_default")(**x)
    np.testing.assert_array_equal(before["probabilities"], after["probabilities"])

    embedder = read_metadata(
        add_metadata(tiny["embedder"], kind="embedder", vocabulary=VOCABULARY, lowercase=True)
    )
    assert embedder["kind"] == "embedder" and embedder["label_names"] is None
    assert embedder["associated_files"] == ["vocab.txt"]
    (output,) = embedder["outputs"]
    assert output["name"] == "embeddings" and output["associated_files"] == [] and output["stats"] is None
    assert output["shape"] == [1, 8] and embedder["name"] == "BertEmbedder"


# (model: a `tiny` key or the bytes themselves, the arguments that differ from a good
# classifier call, the error). A good call: the tiny classifier, its vocabulary, lowercase,
# labels a/b/c.
BAD_CALLS = {
    "kind": (
        "classifier",
        {"kind": "detector"},
        r"kind must be one of \['classifier', 'embedder'\]\. Received: kind='detector'",
    ),
    "cased": (
        "classifier",
        {"lowercase": False},
        r"lowercase=False cannot be described .* always lower-cases",
    ),
    "lowercase not bool": (
        "classifier",
        {"lowercase": "yes"},
        r"lowercase must be True or False\. Received: lowercase='yes'",
    ),
    "no labels": (
        "classifier",
        {"label_names": None},
        r"kind='classifier' needs label_names \(the 3 class names",
    ),
    "label count": (
        "classifier",
        {"label_names": ["a", "b"]},
        r"label_names must name each of the 3 classes\. Received 2 names",
    ),
    "duplicate labels": (
        "classifier",
        {"label_names": ["a", "b", "a"]},
        r"label_names must be distinct\. Received duplicates: \['a'\]",
    ),
    "label line break": (
        "classifier",
        {"label_names": ["a", "b\nc", "d"]},
        r"cannot hold line breaks\. Received: \['b\\nc'\]",
    ),
    "embedder with labels": (
        "embedder",
        {"kind": "embedder", "label_names": ["a"]},
        r"kind='embedder' takes no label_names",
    ),
    "classifier on embeddings [1, 8]": ("embedder", {}, r"label_names must name each of the 8 classes"),
    "vocab lacks specials": (
        "classifier",
        {"vocabulary": VOCABULARY[2:]},
        r"lacks BERT's special tokens \['\[PAD\]', '\[UNK\]'\]",
    ),
    "vocab line break": (
        "classifier",
        {"vocabulary": VOCABULARY + ["a\nb"]},
        r"without line breaks .* Received: \['a\\nb'\]",
    ),
    "vocab empty token": (
        "classifier",
        {"vocabulary": VOCABULARY + [""]},
        r"non-empty strings without line breaks",
    ),
    "vocab missing": (
        "classifier",
        {"vocabulary": None},
        r"vocabulary must be a list of WordPiece tokens or a vocab.txt path",
    ),
    "empty name": (
        "classifier",
        {"name": ""},
        r"name must be a non-empty string or None\. Received: name=''",
    ),
    "path, not bytes": (
        "model.tflite",
        {},
        r"tflite_bytes must be the bytes of a \.tflite file\. Received: an object of type str",
    ),
    "not a tflite": (
        b"PK\x03\x04" + bytes(60),
        {},
        r"tflite_bytes is not a TFLite model: it lacks the flatbuffer identifier 'TFL3'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_arguments(tiny, case):
    model, changes, message = BAD_CALLS[case]
    call = dict(kind="classifier", vocabulary=VOCABULARY, lowercase=True, label_names=["a", "b", "c"])
    call.update(changes)
    with pytest.raises(ValueError, match=message):
        add_metadata(tiny.get(model, model) if isinstance(model, str) else model, **call)


def test_bad_models(tiny, tmp_path):
    vocab = VOCABULARY
    once = add_metadata(tiny["embedder"], kind="embedder", vocabulary=vocab, lowercase=True)
    with pytest.raises(ValueError, match="already carries TFLITE_METADATA"):
        add_metadata(once, kind="embedder", vocabulary=vocab, lowercase=True)
    entries = r"\['CONVERSION_METADATA', 'min_runtime_version'\]"
    with pytest.raises(ValueError, match=rf"carries no TFLITE_METADATA \(its metadata entries: {entries}\)"):
        read_metadata(tiny["embedder"])
    keras_names = ("token_ids", "padding_mask", "segment_ids")
    wrong_names = tflite_from_keras(ids_probe(8), "embeddings", 8, tmp_path, keras_names)
    names = r"\['ids', 'mask', 'segment_ids'\]"
    with pytest.raises(
        ValueError, match=rf"three model inputs named {names}\. Received inputs: \[.*'token_ids'"
    ):
        add_metadata(wrong_names, kind="embedder", vocabulary=vocab, lowercase=True)
    dynamic = tflite_from_keras(ids_probe(None), "embeddings", None, tmp_path)
    with pytest.raises(ValueError, match=r"must have the fixed shape \[1, N\] .* shape_signature=\[1, -1\]"):
        add_metadata(dynamic, kind="embedder", vocabulary=vocab, lowercase=True)


# --- MediaPipe Tasks on the real MiniLM and real MR sentences ------------------------------


def _take(inputs, index):
    return {key: value[index] for key, value in inputs.items()}


@pytest.fixture(scope="module")
def mediapipe_runs(tmp_path_factory, mediapipe_venv, minilm, mr):
    """The classifier, embedder and ids probe exported with metadata and run in MediaPipe, and
    the Keras side of every comparison."""
    texts, labels = mr
    workdir = tmp_path_factory.mktemp("mediapipe")
    preprocessor = BertPreprocessor.from_model(minilm, sequence_length=LENGTH)
    ours = {key: np.asarray(value) for key, value in preprocessor(texts).items()}  # [4000, LENGTH] each

    # A real sentiment head without training: the direction between the mean (unnormalised)
    # MiniLM sentence vectors of positive and negative MR sentences, scaled to logits of a few
    # units, so top labels split between the classes and probabilities spread over (0, 1).
    raw = kb.BertEmbedder(minilm, pooling="mean", normalize=False)
    features = raw.predict(_take(ours, HEAD_FIT), batch_size=50, verbose=0)["embeddings"]
    y = labels[HEAD_FIT]
    direction = features[y == 1].mean(0) - features[y == 0].mean(0)
    center = (features[y == 1].mean(0) + features[y == 0].mean(0)) / 2
    scale = 2.0 / ((features - center) @ direction).std()
    classifier = kb.BertClassifier(
        minilm, num_classes=2, activation="softmax", pooling="mean", label_names=LABELS, name="mr_classifier"
    )
    half = scale / 2 * direction
    classifier.output_dense.set_weights(
        [np.stack([-half, half], 1), np.array([half @ center, -(half @ center)])]
    )
    embedder = kb.BertEmbedder(minilm, pooling="mean", name="mr_embedder")

    models = {
        "classifier": add_metadata(
            tflite_from_keras(classifier, "probabilities", LENGTH, workdir),
            kind="classifier",
            vocabulary=minilm.vocabulary,
            lowercase=minilm.lowercase,
            label_names=LABELS,
        ),
        "embedder": add_metadata(
            tflite_from_keras(embedder, "embeddings", LENGTH, workdir),
            kind="embedder",
            vocabulary=minilm.vocabulary,
            lowercase=minilm.lowercase,
        ),
        "probe": add_metadata(
            tflite_from_keras(ids_probe(LENGTH), "embeddings", LENGTH, workdir),
            kind="embedder",
            vocabulary=minilm.vocabulary,
            lowercase=minilm.lowercase,
        ),
    }
    paths = {}
    for key, tflite in models.items():
        paths[key] = workdir / f"{key}.tflite"
        paths[key].write_bytes(tflite)

    # The probe sees every MR sentence, and each non-ASCII one once more with its accents
    # stripped (NFD, marks dropped: BERT's uncased normalisation, which MediaPipe lacks).
    accented = [i for i, text in enumerate(texts) if not text.isascii()]
    stripped = [strip_accents(texts[i]) for i in accented]
    probe = run_mediapipe(
        workdir, texts + stripped, embed=[paths["probe"]], metadata=[paths["classifier"], paths["embedder"]]
    )
    sample = [texts[i] for i in range(len(texts))[SAMPLE]]
    tasks = run_mediapipe(workdir, sample, classify=[paths["classifier"]], embed=[paths["embedder"]])

    fed = np.array(probe["embed"][str(paths["probe"])]).reshape(-1, 3, LENGTH)
    assert np.array_equal(fed, np.round(fed))
    fed = {
        "token_ids": fed[:, 0].astype("int32"),
        "padding_mask": fed[:, 1].astype("int32"),
        "segment_ids": fed[:, 2].astype("int32"),
    }
    theirs = _take(fed, slice(0, len(texts)))
    same_ids = np.all([np.all(theirs[k] == ours[k], axis=1) for k in ours], axis=0)  # [4000]

    # Keras on MediaPipe's own ids, for the sample sentences where they differ from ours.
    sample_ours = _take(ours, SAMPLE)
    differ = np.flatnonzero(~same_ids[SAMPLE])
    on_their_ids = _take(_take(theirs, SAMPLE), differ)
    return {
        "texts": texts,
        "ours": ours,
        "theirs": theirs,
        "same_ids": same_ids,
        "sample_same_ids": same_ids[SAMPLE],
        "stripped": dict(zip(accented, _take(fed, slice(len(texts), None))["token_ids"])),
        "labels": labels[SAMPLE],
        "models": models,
        "metadata": probe["metadata"],
        "paths": paths,
        "mediapipe_probabilities": np.array(tasks["classify"][str(paths["classifier"])]),
        "mediapipe_labels": tasks["labels"][str(paths["classifier"])],
        "mediapipe_embeddings": np.array(tasks["embed"][str(paths["embedder"])]),
        "keras_probabilities": classifier.predict(sample_ours, batch_size=50, verbose=0)["probabilities"],
        "keras_embeddings": embedder.predict(sample_ours, batch_size=50, verbose=0)["embeddings"],
        "differ": differ,
        "keras_probabilities_on_their_ids": np.asarray(classifier(on_their_ids)["probabilities"])
        if len(differ)
        else np.zeros((0, len(LABELS))),
        "keras_embeddings_on_their_ids": np.asarray(embedder(on_their_ids)["embeddings"])
        if len(differ)
        else np.zeros((0, minilm.hidden_dim)),
        "versions": tasks["versions"],
    }


# The four tests of mediapipe_runs are slow together: the fixture converts MiniLM three times and
# runs MediaPipe on 4,000 sentences in its own venv (about 85 s), built once, in make test-slow.
MEDIAPIPE = pytest.mark.slow


@MEDIAPIPE
def test_mediapipe_reads_our_metadata(mediapipe_runs):
    for kind in ("classifier", "embedder"):
        ours = read_metadata(mediapipe_runs["models"][kind])
        theirs = mediapipe_runs["metadata"][str(mediapipe_runs["paths"][kind])]
        assert (
            theirs["min_parser_version"] == ours["min_parser_version"] == theirs["json"]["min_parser_version"]
        )
        assert theirs["packed_files"] == ours["associated_files"]
        (subgraph,) = theirs["json"]["subgraph_metadata"]
        assert [t["name"] for t in subgraph["input_tensor_metadata"]] == [t["name"] for t in ours["inputs"]]
        assert subgraph["input_process_units"] == [
            {
                "options_type": "BertTokenizerOptions",
                "options": {
                    "vocab_file": [
                        {
                            "name": "vocab.txt",
                            "description": ours["input_process_units"][0]["vocab_files"][0]["description"],
                            "type": "VOCABULARY",
                        }
                    ]
                },
            }
        ]
        (output,) = subgraph["output_tensor_metadata"]
        assert output["name"] == ours["outputs"][0]["name"]
        label_files = ["TENSOR_AXIS_LABELS"] if kind == "classifier" else []
        assert [f["type"] for f in output.get("associated_files", [])] == label_files
    assert mediapipe_runs["mediapipe_labels"] == LABELS


@MEDIAPIPE
def test_mediapipe_tokenizer_differs_from_ours_only_by_accents(mediapipe_runs):
    """MediaPipe's BERT preprocessor does not strip accents (BERT's uncased tokenizer, ours, does):
    on the MR sentences that is the whole difference, measured id for id."""
    texts, same = mediapipe_runs["texts"], mediapipe_runs["same_ids"]
    ours, theirs, stripped = mediapipe_runs["ours"], mediapipe_runs["theirs"], mediapipe_runs["stripped"]
    mismatched = np.flatnonzero(~same)
    print(
        f"\nMediaPipe's ids differ from ours on {len(mismatched)} of {len(texts)} MR sentences "
        f"({len(stripped)} hold non-ASCII text):"
    )
    for i in mismatched:
        print(f"  {i}: {texts[i].strip()!r}")
    # Segment ids are 0 and the mask covers [CLS] ... [SEP], truncation included.
    assert np.all(theirs["segment_ids"] == 0)
    assert np.array_equal(theirs["padding_mask"], (theirs["token_ids"] != 0).astype("int32"))
    assert len(mismatched) == MR_ID_MISMATCHES
    # Every sentence whose ids differ holds an accented letter, and MediaPipe's ids on the same
    # sentence with its accents stripped are ours, id for id.
    assert all(strip_accents(texts[i]) != texts[i] for i in mismatched)
    for i in mismatched:
        np.testing.assert_array_equal(stripped[i], ours["token_ids"][i], err_msg=texts[i])


@MEDIAPIPE
def test_text_classifier_matches_keras(mediapipe_runs):
    same, differ = mediapipe_runs["sample_same_ids"], mediapipe_runs["differ"]
    got, want = mediapipe_runs["mediapipe_probabilities"], mediapipe_runs["keras_probabilities"]
    top = got.argmax(1)
    print(
        f"\nTextClassifier on {len(got)} MR sentences, {same.sum()} with MediaPipe's ids equal to ours: "
        f"same top label as our pipeline on {(top == want.argmax(1))[same].sum()} of them "
        f"({(top == want.argmax(1))[~same].sum()} of the other {(~same).sum()}); max |p - p_keras| "
        f"{np.abs(got - want)[same].max():.2e}; on MediaPipe's own ids where they differ "
        f"{np.abs(got[differ] - mediapipe_runs['keras_probabilities_on_their_ids']).max(initial=0):.2e}; "
        f"positive share {top.mean():.2f}; accuracy vs MR labels "
        f"{(top == mediapipe_runs['labels']).mean():.3f}"
    )
    assert same.sum() >= 200
    assert 0.2 <= top.mean() <= 0.8  # both labels occur: agreement is not a constant answer
    np.testing.assert_array_equal(top[same], want[same].argmax(1))
    assert np.abs(got - want)[same].max() <= 1e-3
    # Where MediaPipe's tokenizer gave other ids, its probabilities are Keras' on those ids.
    on_their_ids = mediapipe_runs["keras_probabilities_on_their_ids"]
    np.testing.assert_array_equal(top[differ], on_their_ids.argmax(1))
    assert np.abs(got[differ] - on_their_ids).max(initial=0) <= 1e-3


@MEDIAPIPE
def test_text_embedder_matches_keras(mediapipe_runs):
    same, differ = mediapipe_runs["sample_same_ids"], mediapipe_runs["differ"]
    got = mediapipe_runs["mediapipe_embeddings"]

    def cosine(a, b):
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    want = cosine(got, mediapipe_runs["keras_embeddings"])
    on_their_ids = cosine(got[differ], mediapipe_runs["keras_embeddings_on_their_ids"])
    print(
        f"\nTextEmbedder on {len(got)} MR sentences: min cosine vs Keras {want[same].min():.9f} on the "
        f"{same.sum()} with MediaPipe's ids equal to ours, {on_their_ids.min(initial=1):.9f} vs Keras on "
        f"MediaPipe's own ids for the other {len(differ)} (vs Keras on ours there: "
        f"{want[~same].min(initial=1):.4f})"
    )
    assert got.shape == (300, 384)
    assert want[same].min() >= 0.9999
    assert on_their_ids.min(initial=1) >= 0.9999
