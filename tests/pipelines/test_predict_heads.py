"""`kbert predict --file --runner direct` for every head beside the single-text classifiers (pair,
tagging, squad) against the one-process `kbert predict --file --json`, on real data: MR
sentence pairs, Penn Treebank sentences of tagged-en-wsj.txt, and the SQuAD v1.1 and v2.0
sample questions; in this process, and (slow) on 2 worker processes (Beam's multi_processing
mode), as on a cluster, where each worker loads the model from the run folder itself."""

import json
import os

import pytest

from tests.conftest import DATA, REPO
from tests.pipelines.helpers import kbert
from tests.pipelines.test_inference_pipeline import mr_sentences, read_jsonl_shards
from tests.harness import minilm_vocab_backbone

WSJ = os.path.join(DATA, "corpora", "tagged-en-wsj.txt")
SQUAD = [
    os.path.join(REPO, "tests", "fixtures", "readers", f"squad_v{v}_sample.json") for v in ("1.1", "2.0")
]


def wsj_sentences(count):
    """[[(word, tag)]] of the first `count` sentences of tagged-en-wsj.txt."""
    with open(WSJ, encoding="utf-8") as f:
        lines = [line.split() for line, _ in zip(f, range(count))]
    return [[tuple(token.rsplit("/", 1)) for token in line] for line in lines]


def squad_questions():
    rows = []
    for path in SQUAD:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
        for article in data:
            for paragraph in article["paragraphs"]:
                rows += [(qa["question"], paragraph["context"]) for qa in paragraph["qas"]]
    return rows


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """A run folder per head on a small random backbone with the real MiniLM vocabulary (what
    is compared is the pipeline against the one-process command, not the model's quality)."""
    import keras_bert_impl as kb

    tags = sorted({tag for sentence in wsj_sentences(100) for _, tag in sentence})
    folder = tmp_path_factory.mktemp("heads")
    paths = {}
    for task in ("pair", "tagging", "squad"):
        backbone = minilm_vocab_backbone()
        if task == "tagging":
            model = kb.BertTokenClassifier(backbone, num_classes=len(tags), label_names=tags)
        elif task == "squad":
            model = kb.BertSpanLabeler(backbone)
        else:
            model = kb.BertClassifier(
                backbone, num_classes=3, label_names=["contradiction", "neutral", "same"]
            )
        run = folder / task
        run.mkdir()
        model.save(str(run / "model.keras"))
        # Squad: short questions and stride, so the 64-wordpiece windows of a context overlap.
        stored = {
            "task": task,
            "seq_len": 64,
            **({"max_query_length": 16, "doc_stride": 24} if task == "squad" else {}),
        }
        (run / "task.json").write_text(json.dumps(stored), encoding="utf-8")
        paths[task] = str(run)
    return paths


def input_lines(task):
    """The --file lines of `task` from real data, a blank line among them."""
    if task == "pair":
        texts = mr_sentences(61)
        lines = [json.dumps({"text": a, "text_b": b}) for a, b in zip(texts, texts[1:])]
    elif task == "tagging":
        lines = [" ".join(word for word, _ in sentence) for sentence in wsj_sentences(60)]
    else:
        lines = [json.dumps({"question": q, "context": c}) for q, c in squad_questions()]
    lines[3] = ""  # a blank line keeps its place: the empty row, as the one-process command gives
    return lines


def same(a, b):
    """Equal, floats within 1e-5."""
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, abs=1e-5, rel=0)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("workers", (1, pytest.param(2, marks=pytest.mark.slow)))  # 2: ~35-55 s a head
@pytest.mark.parametrize("task", ("pair", "tagging", "squad"))
def test_every_head_on_the_direct_runner_equals_kbert_predict(task, workers, heads, tmp_path, capsys):
    lines = input_lines(task)
    path = tmp_path / f"{task}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert kbert("predict", "--model", heads[task], "--file", path, "--json") == 0
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    out = tmp_path / "predictions"
    argv = (
        "--runner",
        "direct",
        "--workers",
        workers,
        "--lines-per-shard",
        -(-len(lines) // 3),
        "--output",
        out,
    )
    assert kbert("predict", "--model", heads[task], "--file", path, *argv) == 0
    manifest, rows = read_jsonl_shards(out)
    assert manifest["lines"] == len(lines) == len(expected) == len(rows) and len(manifest["shards"]) == 3
    assert rows[3] == expected[3] and expected[3]["text" if task != "squad" else "question"] in ("", None)
    assert all(same(a, b) for a, b in zip(rows, expected)), next(
        (a, b) for a, b in zip(rows, expected) if not same(a, b)
    )


def test_bad_lines_are_one_line_before_any_worker(heads, tmp_path, capsys):
    """A line the one-process command refuses (with the same line: the same functions read both)
    is refused by the launcher, naming the file and line, before any worker starts: not JSON or
    not text for a pair model, a word without wordpieces for a tagger (a lone control character),
    a context without wordpieces for a span labeler; so are the flags --runner does not take."""
    pair = json.dumps({"text": "a", "text_b": "b"})
    out = tmp_path / "out"
    cases = [
        ("pair", [pair, pair, '{"text": "a"}'], (), ":3: a pair model needs a JSON object"),
        ("pair", [pair, '{"text": "\\ud800", "text_b": "b"}'], (), ":2 ('text') holds '\\ud800'"),
        ("tagging", ["the film", "", "a \u0007 b"], (), ":3: the word(s) ['\\x07'] have no wordpieces"),
        ("squad", [json.dumps({"question": "Who ?", "context": "\u0007"})], (), ":1: the context has no"),
        ("pair", [pair], ("--text-b", "b"), "--runner direct predicts on --file only"),
        ("tagging", ["a b"], ("--threshold", "2"), "--threshold is a probability"),
    ]
    for task, lines, flags, message in cases:
        path = tmp_path / f"{task}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        argv = ("--file", path, *flags, "--runner", "direct", "--output", out)
        code = kbert("predict", "--model", heads[task], *argv)
        err = capsys.readouterr().err
        expected = message if message.startswith("-") else f"--file {path}{message}"
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (task, err)
        assert not out.exists()
