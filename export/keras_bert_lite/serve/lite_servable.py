"""A classifier's `kbert export` folder served without TensorFlow: its raw-text model as TF Serving
serves the folder's `serving/NAME` SavedModel (the same name, version, signature, inputs, outputs
and metadata), computed by `LiteTextClassifier` from the folder's float32 or dynamic_int8 .tflite
on LiteRT. tests/commands/test_serve_litert.py holds its answers and metadata to the SavedModel's.

Shape legend: N texts, C classes, S the export's sequence length.
"""

import numpy as np

from keras_bert_lite.lite_text_classifier import LiteTextClassifier
from keras_bert_lite.serve.tensor_spec import TensorSpec

SIGNATURE = "serving_default"
# TensorFlow's DataType names, as TF Serving's metadata writes them.
_DATA_TYPES = {"string": "DT_STRING", "float32": "DT_FLOAT", "int32": "DT_INT32"}


class LiteServable:
    """The raw-text model of a classifier's export folder, on LiteRT.

    Args:
        export_dir: a `kbert export` folder of a classifier (its export.json, vocab.txt and the
            .tflite of `quantization`).
        quantization: "float32" (default) or "dynamic_int8".
        version: int. The version it answers as (TF Serving's default layout: 1).

    Attributes (what `ModelServer` serves): name, version, signatures, batch_major.
    """

    def __init__(self, export_dir, quantization="float32", version=1):
        self.classifier = LiteTextClassifier(export_dir, quantization=quantization)
        manifest = self.classifier.manifest
        self.name = manifest["name"]
        self.version = int(version)
        self.text_inputs = list(manifest["text_inputs"])
        classes = len(self.classifier.label_names)
        length = self.classifier.sequence_length
        # The SavedModel's text signature's outputs (export_signatures.ExportSignatures.text_outputs).
        outputs = {name: TensorSpec([None, classes], "float32", name) for name in self.classifier.outputs}
        outputs.update(
            token_ids=TensorSpec([None, length], "int32", "token_ids"),
            top_label=TensorSpec([None], "string", "top_label"),
            top_score=TensorSpec([None], "float32", "top_score"),
            label_names=TensorSpec([None, classes], "string", "label_names"),
        )
        inputs = {name: TensorSpec([None], "string", name) for name in self.text_inputs}
        self.signatures = {SIGNATURE: {"inputs": inputs, "outputs": outputs}}
        self.batch_major = {SIGNATURE: True}

    def status(self):
        """One entry of TF Serving's `model_version_status` list."""
        return {
            "version": str(self.version),
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }

    def metadata(self):
        """The body of TF Serving's `GET /v1/models/NAME[/versions/N]/metadata`: the signature as
        TF Serving renders the SavedModel's SignatureDef (tensor names as TensorFlow names a
        saved function's: its inputs `serving_default_NAME:0`, its outputs in name order)."""
        specs = self.signatures[SIGNATURE]
        inputs = {name: _tensor_info(spec, f"{SIGNATURE}_{name}:0") for name, spec in specs["inputs"].items()}
        outputs = {
            name: _tensor_info(specs["outputs"][name], f"StatefulPartitionedCall:{i}")
            for i, name in enumerate(sorted(specs["outputs"]))
        }
        signature = {
            "inputs": inputs,
            "outputs": outputs,
            "method_name": "tensorflow/serving/predict",
            "defaults": {},
        }
        return {
            "model_spec": {"name": self.name, "signature_name": "", "version": str(self.version)},
            "metadata": {"signature_def": {"signature_def": {SIGNATURE: signature}}},
        }

    def run(self, signature, inputs):
        """{input: bytes array [N]} -> {output: array [N, ...]}, the SavedModel's text outputs."""
        texts = [_text(value, self.text_inputs[0], i) for i, value in enumerate(inputs[self.text_inputs[0]])]
        texts_b = None
        if self.classifier.pair:
            name = self.text_inputs[1]
            texts_b = [_text(value, name, i) for i, value in enumerate(inputs[name])]
        rows = self.classifier.pack(texts, texts_b)  # tokenized once, for the forward and token_ids
        outputs = self.classifier.predict_packed(rows)
        padded = self.classifier.tokenizer.pad(rows, self.classifier.sequence_length)  # [N, S] each
        outputs["token_ids"] = padded["token_ids"]
        probabilities = outputs["probabilities"]  # [N, C]
        names = np.array([name.encode("utf-8") for name in self.classifier.label_names], dtype=object)
        outputs["top_label"] = names[probabilities.argmax(-1)]  # [N]
        outputs["top_score"] = probabilities.max(-1)  # [N]
        outputs["label_names"] = np.tile(names[None], (len(texts), 1))  # [N, C]
        return outputs


def _text(value, name, index):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"input {name!r} at example {index} is not UTF-8 text ({e.reason} at byte {e.start}): send "
            "the text as UTF-8."
        ) from None


def _tensor_info(spec, tensor_name):
    dims = [{"size": str(-1 if size is None else size), "name": ""} for size in spec.shape.as_list()]
    return {
        "name": tensor_name,
        "dtype": _DATA_TYPES[spec.dtype.name],
        "tensor_shape": {"dim": dims, "unknown_rank": False},
    }
