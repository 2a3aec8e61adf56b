"""A `kbert export` folder's classifier on raw texts, on LiteRT, without TensorFlow or Keras.

What an app or a server needs to classify one sentence is the exported `.tflite` file, the
vocabulary and the casing. TensorFlow adds seconds of import and hundreds of MiB before the
first answer (bench/results/lite_process.json measures both against ONNX Runtime's): here the
texts are tokenized by `WordPieceTokenizer` (plain Python, BertPreprocessor's ids) and the file
runs on LiteRT's XNNPACK, batched by length as `TextPredictor` batches them, each batch cut to
its longest row. tests/lite/ hold the outputs to the Keras model's.

Shape legend: N texts, B batch, T a batch's width.
"""

import contextlib
import json
import os
import sys
import tempfile

import numpy as np

from keras_bert_lite.checks import positive_int
from keras_bert_lite.wordpiece_tokenizer import WordPieceTokenizer

MANIFEST = "export.json"
VOCABULARY = "vocab.txt"


class LiteTextClassifier:
    """Raw texts (or pairs) -> the exported classifier's outputs, in input order.

    Args:
        export_dir: a `kbert export` folder of a classifier holding `export.json`, `vocab.txt` and
            the `.tflite` file of `quantization` (`--formats tflite`).
        quantization: which `tflite/NAME_QUANT.tflite` runs: "float32" (default) or
            "dynamic_int8", or any other of the folder's free-shape files ("float16",
            "int8_mixed").
        sequence_length: int. Texts are cut to it (default: the export's, the training length).
        batch_size: int. Texts per forward pass.
        num_threads: int. XNNPACK's threads (default: the CPUs this process may use).

    Attributes:
        label_names: list of str, one per class. outputs: the file's output names. pair: whether
            rows are text pairs. multi_label: whether "probabilities" are per-label sigmoids.
            manifest: the folder's export.json.

    Example:
    >>> classifier = LiteTextClassifier("data/demo/mr_export")  # doctest: +SKIP
    >>> classifier.predict(["a fine film"])["probabilities"].shape  # doctest: +SKIP
    (1, 2)
    """

    def __init__(
        self, export_dir, quantization="float32", sequence_length=None, batch_size=32, num_threads=None
    ):
        from ai_edge_litert.interpreter import Interpreter

        self.manifest = manifest = _read_manifest(export_dir)
        if manifest.get("head") != "classifier":
            raise ValueError(
                f"{export_dir!r} exports a {manifest.get('head')!r} model; LiteTextClassifier runs a "
                "classifier's export (kbert export of a classification, pair or multilabel run)."
            )
        key = f"tflite_{quantization}"
        files = manifest.get("files", {})
        if key not in files:
            held = sorted(k.removeprefix("tflite_") for k in files if k.startswith("tflite_"))
            raise ValueError(
                f"{export_dir!r} has no {quantization} .tflite file (it holds: {held or 'none'}). Pass "
                f"one of those, or export it: kbert export --formats tflite --quantizations {quantization}."
            )
        batch_size = positive_int("batch_size", batch_size)
        num_threads = None if num_threads is None else positive_int("num_threads", num_threads)
        most = manifest["max_sequence_length"]
        sequence_length = manifest["sequence_length"] if sequence_length is None else sequence_length
        minimum = 4 if manifest["pair"] else 3
        if not isinstance(sequence_length, int) or not minimum <= sequence_length <= most:
            raise ValueError(
                f"sequence_length must be an int in [{minimum}, {most}] (the model's positions). "
                f"Received: sequence_length={sequence_length!r}"
            )
        with open(os.path.join(export_dir, VOCABULARY), encoding="utf-8") as f:
            vocabulary = f.read().splitlines()
        self.tokenizer = WordPieceTokenizer(vocabulary, lowercase=manifest["lowercase"])
        self.label_names = list(manifest["label_names"])
        self.pair = manifest["pair"]
        if "multi_label" not in manifest:
            raise ValueError(
                f"{os.path.join(export_dir, MANIFEST)} does not say whether the classifier is multi-label "
                "(an export older than keras_bert_lite): export the model again."
            )
        self.multi_label = manifest["multi_label"]
        self.sequence_length = sequence_length
        self.batch_size = batch_size
        # The id graph's inputs: the token ids, the padding mask and the segment ids, in that order.
        self._ids, self._mask, self._segments = manifest["id_inputs"]
        threads = len(os.sched_getaffinity(0)) if num_threads is None else num_threads
        self._runner = Interpreter(
            model_path=os.path.join(export_dir, files[key]), num_threads=threads
        ).get_signature_runner()
        self.outputs = list(manifest["id_outputs"])
        with _native_stderr_held():
            # LiteRT applies XNNPACK (and says so on stderr) on the first run: here, held back.
            one = np.array([[self.tokenizer.cls_id, self.tokenizer.sep_id]], np.int32)
            self._run(one, np.zeros_like(one), np.ones_like(one))

    def _run(self, ids, segments, mask):  # int32 [B, T] each
        return self._runner(**{self._ids: ids, self._mask: mask, self._segments: segments})

    def predict(self, texts, texts_b=None, progress=None):
        """texts (list of str; `texts_b` the second texts of a pair model's rows) -> {output name:
        float32 array [N, ...]} in input order. `progress(n)` is called after each batch with its size."""
        return self.predict_packed(self.pack(texts, texts_b), progress)

    def pack(self, texts, texts_b=None):
        """The rows `predict` runs: `WordPieceTokenizer.pack`'s (token_ids, segment_ids) per text,
        cut to the sequence length, unpadded."""
        texts = list(texts)
        if self.pair != (texts_b is not None):
            raise ValueError(
                "This export is a pair classifier: give texts_b, one second text per text."
                if self.pair
                else "This export classifies single texts: leave texts_b out."
            )
        if texts_b is not None and len(texts_b) != len(texts):
            raise ValueError(
                f"texts_b must have one entry per text. Received {len(texts)} texts and {len(texts_b)}."
            )
        seconds = [None] * len(texts) if texts_b is None else texts_b
        return [self.tokenizer.pack(text, b, self.sequence_length) for text, b in zip(texts, seconds)]

    def predict_packed(self, rows, progress=None):
        """`pack`'s rows -> {output name: float32 array [N, ...]} in their order."""
        outputs = {}
        # Longest first: each batch pads only a little, and the widest shape comes first.
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            x = self.tokenizer.pad([rows[i] for i in batch], len(rows[batch[0]][0]))  # [B, T] each
            result = self._run(x["token_ids"], x["segment_ids"], x["padding_mask"])
            for name, value in result.items():
                if name not in outputs:
                    outputs[name] = np.empty((len(rows), *value.shape[1:]), np.float32)
                outputs[name][batch] = value
            if progress is not None:
                progress(len(batch))
        return outputs


@contextlib.contextmanager
def _native_stderr_held():
    """File descriptor 2 (LiteRT's C++ log lines) into a temporary file for the block: written to
    stderr if the block raises, else dropped."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _read_manifest(export_dir):
    path = os.path.join(export_dir, MANIFEST)
    if not os.path.isfile(path):
        raise ValueError(
            f"{export_dir!r} is not a kbert export folder (it has no {MANIFEST}): pass the --output "
            "folder of kbert export --formats tflite."
        )
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable export manifest ({e}); export the model again.") from None
