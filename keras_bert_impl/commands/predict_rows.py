"""The rows of `kbert predict`: how a --file line reads for each task, and the JSON row a
fine-tuned model gives each input. The one-process command prints these rows (or the plain line
made from each) and the Beam pipeline's workers write them, so the two paths cannot drift."""

import json
import re

import numpy as np

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError

# The JSON keys of a pair or squad --file line; the other tasks read the line as the text.
LINE_KEYS = {"pair": ("text", "text_b"), "squad": ("question", "context")}
# The heads whose features a reader builds (tokenized word by word, or windows of a context):
# their inputs can be refused by that reader, which the Beam launcher runs on every line first.
READER_TASKS = ("tagging", "squad")
# Inputs per reader pass when the Beam launcher checks a file: memory stays one chunk's.
CHECK_CHUNK = 4096
# The most distinct words the launcher remembers as having wordpieces (a few tens of MB).
GOOD_WORDS = 1_000_000


def file_row(task, line, where):
    """The (text, text_b or None) of one --file line, or squad's (question, context); a blank
    line is (None, None), so that output row i answers input line i. `where` names the line in
    errors (`--file F:3`)."""
    if not line.strip():
        return None, None
    if task not in LINE_KEYS:
        return line, None
    keys = LINE_KEYS[task]
    try:
        row = json.loads(line)
        pair = (row[keys[0]], row[keys[1]])
    except (json.JSONDecodeError, KeyError, TypeError):
        pair = None
    if pair is None or not all(isinstance(t, str) for t in pair):
        raise UsageError(
            f"{where}: a {task} model needs a JSON object with string {list(keys)} per line. Received: "
            f"{line[:80]!r}"
        )
    return pair


def check_text(text, name):
    """Raises UsageError naming `name` unless `text` encodes as UTF-8 (argv's undecodable bytes
    and JSON's lone surrogate escapes do not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start]
        if 0xDC80 <= ord(bad) <= 0xDCFF:  # Python's stand-in for an undecodable byte of argv
            what = (
                f"the byte {ord(bad) - 0xDC00:#04x} at character {e.start}, which is not UTF-8 (the "
                "shell passed bytes its locale could not decode)"
            )
        else:
            what = (
                f"{bad!r} at character {e.start}, a lone UTF-16 surrogate (a JSON escape such as "
                "\\ud800 alone), which is no character"
            )
        raise UsageError(f"{name} holds {what}: pass the text as UTF-8.") from None


def blank_row(task):
    """The row of a blank input line: its text's field(s), then empty results (nulls)."""
    fields = {"pair": {"text": None, "text_b": None}, "squad": {"question": None}}.get(task, {"text": ""})
    empty = {
        "multilabel": {"labels": None, "probabilities": None},
        "tagging": {"tags": []},
        "squad": {"answer": None},
    }.get(task, {"label": None, "probability": None})
    return {**fields, **empty}


def plain_line(task, row):
    """`kbert predict`'s output line without --json for one row."""
    if row == blank_row(task):
        return {"multilabel": "\t", "tagging": "", "squad": "\t"}.get(task, "\t\t")
    if task == "tagging":
        return " ".join(f"{t['word']}/{t['tag']}" for t in row["tags"])
    if task == "squad":
        return f"{row['answer']}\t{row['question']}"
    if task == "multilabel":
        return f"{','.join(row['labels']) or '(none)'}\t{row['text']}"
    return f"{row['label']}\t{row['probability']:.4f}\t{row['text']}"


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def label_fields(task, threshold, names, row, from_logits):
    """A classifier row's result fields from its scores `row` [C] (logits, or probabilities where
    `from_logits` is False): multilabel's labels at or over `threshold` and every probability,
    else the top label and its probability."""
    if task == "multilabel":
        probs = 1 / (1 + np.exp(-row)) if from_logits else row
        chosen = [names[i] for i in np.flatnonzero(probs >= threshold)]
        return {"labels": chosen, "probabilities": {n: float(p) for n, p in zip(names, probs)}}
    probs = _softmax(row) if from_logits else row
    best = int(probs.argmax())
    return {"label": names[best], "probability": float(probs[best])}


class RowPredictor:
    """The JSON rows a fine-tuned model gives its inputs, for every head `kbert predict` runs.

    Args:
        setup: `load_for_inference`'s InferenceSetup (the model, its task and length).
        batch_size: rows per forward pass.
        threshold: multilabel: the probability to predict a label.
    """

    def __init__(self, setup, batch_size, threshold=0.5):
        from keras_bert_impl.tokenization import BertPreprocessor

        self.setup, self.task, self.batch_size, self.threshold = setup, setup.task, batch_size, threshold
        self._text_predictor, self._good_words = None, set()
        backbone = setup.model.backbone
        self.preprocessor = (
            BertPreprocessor(backbone.vocabulary, lowercase=backbone.lowercase, sequence_length=setup.seq_len)
            if self.task in READER_TASKS
            else None
        )

    @property
    def text_predictor(self):
        """A classifier's `TextPredictor`, once `rows` ran it (else None)."""
        return self._text_predictor

    def rows(self, inputs, where=None, progress=None):
        """One row per input of `inputs` ([(text, text_b or None)] or squad's [(question,
        context)]; (None, None) for a blank line, whose row is `blank_row`'s), in order.
        `where(i)` names input i in errors; `progress(n)` hears of each classifier batch."""
        given = [i for i, (text, _) in enumerate(inputs) if text is not None]
        texts = [inputs[i] for i in given]
        name = (lambda j: where(given[j])) if where else (lambda j: "predict")
        if not texts:
            results = []
        elif self.task == "tagging":
            results = self._tags([text for text, _ in texts], name)
        elif self.task == "squad":
            results = self._answers(texts, name)
        else:
            results = self._labels(texts, progress)
        rows = [blank_row(self.task) for _ in inputs]
        for i, row in zip(given, results):
            rows[i] = row
        return rows

    def check_file(self, lines, name):
        """Reads the lines of --file `name` as `rows` would take them and refuses a bad one in one
        line, without running the model (the Beam launcher's pass before any worker starts);
        returns the line count. The readers' checks run on CHECK_CHUNK inputs at a time."""
        count, chunk = 0, []
        for count, line in enumerate(lines, 1):
            where = f"{name}:{count}"
            row = file_row(self.task, line, where)
            for part, text in zip(LINE_KEYS.get(self.task, ("text",)), row):
                if text is not None:
                    check_text(text, f"{where} ({part!r})" if self.task in LINE_KEYS else where)
            if row[0] is not None and self.task in READER_TASKS:
                chunk.append((count, row))
            if len(chunk) == CHECK_CHUNK:
                self._check(chunk, name)
                chunk = []
        if chunk:
            self._check(chunk, name)
        return count

    def _check(self, chunk, name):
        """Refuses what the tagger's or span labeler's reader would refuse in `chunk` ([(line
        number, input)]). Their only refusals of a text here are a word (tagging) or a whole
        context (squad) without wordpieces, so each distinct word or context is tokenized alone
        (a word once per run: most repeat) and the reader runs only on the inputs holding one
        that has none, for its own message."""
        parts = {text for _, (text, _) in chunk} if self.task == "tagging" else {c for _, (_, c) in chunk}
        if self.task == "tagging":
            parts = {word for text in parts for word in text.split()} - self._good_words
        parts = sorted(parts)
        empty = {part for part, ids in zip(parts, self.preprocessor.tokenize_lists(parts)) if not ids}
        if self.task == "tagging" and len(self._good_words) < GOOD_WORDS:
            self._good_words.update(set(parts) - empty)
        if self.task == "tagging":
            suspects = [(n, row) for n, row in chunk if empty.intersection(row[0].split())]
        else:
            suspects = [(n, row) for n, row in chunk if row[1] in empty]
        if not suspects:
            return

        def where(j):
            return f"{name}:{suspects[j][0]}"

        rows = [row for _, row in suspects]
        if self.task == "tagging":
            self._tag_dataset([text for text, _ in rows], where)
        else:
            self._squad_dataset(rows, where)

    def _labels(self, texts, progress):
        """A classifier's rows; TextPredictor tokenizes for itself."""
        from keras_bert_impl.commands.inference_setup import text_predictor

        if self._text_predictor is None:
            self._text_predictor = text_predictor(self.setup, self.batch_size)
        model = self.setup.model
        names = model.label_names or [str(i) for i in range(model.num_classes)]
        pair = self.task == "pair"
        # Sorted by length and padded per batch (to its longest row), not to --seq-len: the same
        # numbers (within 1e-5), several times faster on short texts.
        outputs = self._text_predictor.predict(
            [a for a, _ in texts], [b for _, b in texts] if pair else None, progress=progress
        )
        from_logits = "logits" in outputs
        scores = outputs["logits"] if from_logits else outputs.get("probabilities", [])
        rows = []
        for (text, text_b), row in zip(texts, scores):
            rows.append({"text": text, **self._label_fields(names, row, from_logits)})
            if pair:
                rows[-1]["text_b"] = text_b
        return rows

    def _label_fields(self, names, row, from_logits):
        return label_fields(self.task, self.threshold, names, row, from_logits)

    def _tag_dataset(self, texts, where):
        """The TaggingReader and its dataset of whitespace-separated words, aligned to wordpieces
        exactly as in training (the tags are placeholders); a text it refuses is a UsageError."""
        from keras_bert_impl.data.readers import MalformedRowError, TaggingReader

        model = self.setup.model
        names = model.label_names or [str(i) for i in range(model.num_classes)]
        reader = TaggingReader(self.preprocessor, labels=names, batch_size=self.batch_size)
        try:
            sentences = [[(word, names[0]) for word in text.split()] for text in texts]
            return names, reader.read_sentences(sentences, source="predict")
        except MalformedRowError as e:  # its line i is texts[i - 1]: name the user's input instead
            raise UsageError(
                f"{where(e.line - 1) if e.line else 'predict'}: {e.reason}. Fix or leave out that text."
            ) from None

    def _tags(self, texts, where):
        """Each whitespace-separated word's tag: the prediction on its first wordpiece (as trained)."""
        names, dataset = self._tag_dataset(texts, where)
        rows = []
        for x, _, weights in dataset:
            logits = np.asarray(self.setup.model.predict_on_batch(x)["logits"])
            for row_logits, row_weights in zip(logits, np.asarray(weights)):
                text = texts[len(rows)]
                tags = [names[t] for t in row_logits.argmax(-1)[row_weights > 0]]
                rows.append(
                    {"text": text, "tags": [{"word": w, "tag": t} for w, t in zip(text.split(), tags)]}
                )
        return rows

    def _squad_dataset(self, questions, where):
        """The SquadReader and its dataset of [(question, context)], each question's id its index."""
        from keras_bert_impl.data.readers import MalformedRowError, SquadReader

        stored = self.setup.stored
        reader = SquadReader(
            self.preprocessor,
            doc_stride=stored.get("doc_stride", task_data.DEFAULTS["doc_stride"]),
            max_query_length=stored.get("max_query_length", task_data.DEFAULTS["max_query_length"]),
            version_2_with_negative=True,
            batch_size=self.batch_size,
        )
        try:
            return reader, reader.read_data(_squad_data(questions), source="predict")
        except MalformedRowError as e:
            found = re.search(r"\bid (\d+)\b", e.location or "")
            where = where(int(found.group(1))) if found else "predict"
            raise UsageError(f"{where}: {e.reason}. Fix or leave out that question.") from None

    def _answers(self, questions, where):
        from keras_bert_impl import evaluation

        reader, dataset = self._squad_dataset(questions, where)
        starts, ends = [], []
        for x, _ in dataset:
            out = self.setup.model.predict_on_batch(x)
            starts.append(np.asarray(out["start_logits"]))
            ends.append(np.asarray(out["end_logits"]))
        answers = evaluation.decode_squad_predictions(
            reader.features, np.concatenate(starts), np.concatenate(ends)
        )
        return [{"question": q, "answer": answers.get(str(i), "")} for i, (q, _) in enumerate(questions)]


def _squad_data(questions):
    """[(question, context)] as a SQuAD 2.0 file, each question's id its index."""
    paragraphs = [
        {
            "context": context,
            "qas": [{"id": str(i), "question": question, "answers": [], "is_impossible": True}],
        }
        for i, (question, context) in enumerate(questions)
    ]
    return {"version": "1.1", "data": [{"title": "predict", "paragraphs": paragraphs}]}
