"""Issue 29 item 4: `kbert predict` builds the features of every head in memory: no file is
written (it used to write the texts into a temporary word/TAG file and a SQuAD JSON to reach
the readers), and the outputs are those of the file-based code, pinned below from a run of the
code before the change (136d477's predict.py) on the same models and sentences."""

import builtins
import json
import tempfile

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import main
from keras_bert_impl.data.readers import SquadReader, TaggingReader
from keras_bert_impl.tokenization import BertPreprocessor

SENTENCES = [
    "the film is a gripping , funny ride",
    "Paris is the capital of France",
    "nothing happens for two hours",
]
QUESTION, CONTEXT = "What is the capital of France ?", "Paris is the capital and largest city of France ."
TAGS = ["O", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def heads(tiny_init, tmp_path_factory):
    """A .keras file per head on the one-layer test backbone, weights from a fixed seed."""
    folder = tmp_path_factory.mktemp("heads")
    paths = {}
    for task in ("classification", "multilabel", "pair", "tagging", "squad"):
        keras.utils.set_random_seed(1)
        backbone = keras.saving.load_model(tiny_init)
        if task == "tagging":
            model = kb.BertTokenClassifier(backbone, num_classes=3, label_names=TAGS)
        elif task == "squad":
            model = kb.BertSpanLabeler(backbone)
        else:
            model = kb.BertClassifier(
                backbone,
                num_classes=3,
                multi_label=task == "multilabel",
                label_names=["neg", "neutral", "pos"],
            )
        run = folder / task
        run.mkdir()
        model.save(str(run / "model.keras"))
        with open(run / "task.json", "w", encoding="utf-8") as f:
            # A short --max-query-length and stride: the 32-wordpiece windows of the squad run overlap.
            json.dump(
                {
                    "task": task,
                    "seq_len": 32,
                    **({"max_query_length": 12, "doc_stride": 8} if task == "squad" else {}),
                },
                f,
            )
        paths[task] = str(run)
    return paths


def _argv(task, model):
    argv = ["predict", "--model", model, "--json"]
    if task == "squad":
        return [
            *argv,
            "--question",
            QUESTION,
            "--context",
            CONTEXT,
            "--question",
            "Who ?",
            "--context",
            "Nobody .",
        ]
    if task == "pair":
        return [*argv, *[x for s in SENTENCES for x in ("--text-b", s)], *SENTENCES]
    return [*argv, *SENTENCES]


@pytest.fixture
def no_files_written(monkeypatch):
    """Once the model is loaded (Keras unpacks a .keras' assets in a temporary folder of its own),
    fails any attempt to create a file: open() for writing, and tempfile's makers."""
    from keras_bert_impl.commands import model_files

    real_open, real_load = builtins.open, model_files.load_model
    loaded = []

    def load_model(*args, **kwargs):
        model = real_load(*args, **kwargs)
        loaded.append(True)
        return model

    def guarded_open(file, mode="r", *args, **kwargs):
        if loaded and any(flag in mode for flag in "wax+"):
            raise AssertionError(f"predict wrote a file: open({file!r}, {mode!r})")
        return real_open(file, mode, *args, **kwargs)

    def guarded(maker):
        def make(*args, **kwargs):
            if loaded:
                raise AssertionError(f"predict made a temporary file ({maker.__name__})")
            return maker(*args, **kwargs)

        return make

    monkeypatch.setattr(model_files, "load_model", load_model)
    monkeypatch.setattr(builtins, "open", guarded_open)
    for name in ("NamedTemporaryFile", "TemporaryFile", "mkstemp", "mkdtemp", "TemporaryDirectory"):
        monkeypatch.setattr(tempfile, name, guarded(getattr(tempfile, name)))
    return loaded


# From the pre-change predict.py (temporary files), same models, sentences and seed.
# Tagging rows shown as word/TAG strings.
PINNED = {
    "classification": [
        {
            "text": "the film is a gripping , funny ride",
            "label": "neutral",
            "probability": 0.33498093485832214,
        },
        {"text": "Paris is the capital of France", "label": "neutral", "probability": 0.3349798023700714},
        {"text": "nothing happens for two hours", "label": "neutral", "probability": 0.33497920632362366},
    ],
    "multilabel": [
        {
            "text": "the film is a gripping , funny ride",
            "labels": ["neg", "neutral"],
            "probabilities": {
                "neg": 0.5011863112449646,
                "neutral": 0.5022071003913879,
                "pos": 0.49952253699302673,
            },
        },
        {
            "text": "Paris is the capital of France",
            "labels": ["neg", "neutral"],
            "probabilities": {
                "neg": 0.5011875629425049,
                "neutral": 0.5022065043449402,
                "pos": 0.49952253699302673,
            },
        },
        {
            "text": "nothing happens for two hours",
            "labels": ["neg", "neutral"],
            "probabilities": {
                "neg": 0.5011885166168213,
                "neutral": 0.5022075176239014,
                "pos": 0.49952515959739685,
            },
        },
    ],
    "pair": [
        {
            "text": "the film is a gripping , funny ride",
            "label": "neutral",
            "probability": 0.33498257398605347,
            "text_b": "the film is a gripping , funny ride",
        },
        {
            "text": "Paris is the capital of France",
            "label": "neutral",
            "probability": 0.33498185873031616,
            "text_b": "Paris is the capital of France",
        },
        {
            "text": "nothing happens for two hours",
            "label": "neutral",
            "probability": 0.3349813222885132,
            "text_b": "nothing happens for two hours",
        },
    ],
    "tagging": [
        {
            "text": "the film is a gripping , funny ride",
            "tags": "the/I-LOC film/I-LOC is/I-LOC a/I-LOC gripping/I-LOC ,/I-LOC funny/B-LOC ride/I-LOC",
        },
        {
            "text": "Paris is the capital of France",
            "tags": "Paris/I-LOC is/I-LOC the/O capital/B-LOC of/I-LOC France/I-LOC",
        },
        {
            "text": "nothing happens for two hours",
            "tags": "nothing/B-LOC happens/I-LOC for/I-LOC two/O hours/I-LOC",
        },
    ],
    "squad": [
        {"question": "What is the capital of France ?", "answer": "Paris is the capital and largest city"},
        {"question": "Who ?", "answer": "Nobody ."},
    ],
}


def _same(a, b):
    """Equal, floats to 1e-5 (the tiny random heads' probabilities sit near 1/3 and 1/2)."""
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, abs=1e-5)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("task", ("classification", "multilabel", "pair", "tagging", "squad"))
def test_predict_writes_no_file_and_gives_the_file_based_outputs(
    task, heads, no_files_written, tmp_path, capsys
):
    assert main(_argv(task, heads[task])) == 0
    assert no_files_written == [True]  # the guard was armed for the feature building
    out = capsys.readouterr().out
    rows = [json.loads(line) for line in out.strip().splitlines()]
    if task == "tagging":
        rows = [
            {"text": r["text"], "tags": " ".join(f"{t['word']}/{t['tag']}" for t in r["tags"])} for r in rows
        ]
    assert _same(rows, PINNED[task]), rows


def test_in_memory_reading_is_the_file_reading(tiny_init, tmp_path):
    """The readers' in-memory entry points give the arrays their file entry points give."""
    backbone = keras.saving.load_model(tiny_init)
    preprocessor = BertPreprocessor(backbone.vocabulary, lowercase=True, sequence_length=32)
    sentences = [[(word, TAGS[i % 3]) for i, word in enumerate(text.split())] for text in SENTENCES]
    path = tmp_path / "tags.txt"
    path.write_text("".join(" ".join(f"{w}/{t}" for w, t in s) + "\n" for s in sentences), encoding="utf-8")
    from_file = TaggingReader(preprocessor, file_format="word/tag", labels=TAGS, batch_size=2).read(str(path))
    in_memory = TaggingReader(preprocessor, labels=TAGS, batch_size=2).read_sentences(sentences)
    for a, b in zip(from_file, in_memory, strict=True):
        for x, y in zip(a, b, strict=True):
            x, y = (x, y) if isinstance(x, dict) else ({"": x}, {"": y})
            for key in x:
                np.testing.assert_array_equal(np.asarray(x[key]), np.asarray(y[key]))
    data = {
        "version": "1.1",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": CONTEXT,
                        "qas": [
                            {
                                "id": "q",
                                "question": QUESTION,
                                "answers": [{"text": "Paris", "answer_start": 0}],
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    file_reader, memory_reader = (SquadReader(preprocessor, max_query_length=12, doc_stride=8) for _ in "ab")
    for a, b in zip(file_reader.read(str(path)), memory_reader.read_data(data), strict=True):
        for x, y in zip(a, b, strict=True):
            for key in x:
                np.testing.assert_array_equal(np.asarray(x[key]), np.asarray(y[key]))
    assert repr(file_reader.features) == repr(memory_reader.features)
