"""One SavedModel version as TF Serving holds it: its signatures, their metadata, and a call.

TF Serving answers `GET /v1/models/NAME/metadata` with the SavedModel's SignatureDefs
rendered as JSON (proto field names, defaults included); `ServableModel.metadata()` renders
the same protos (tensorflow-serving-api's GetModelMetadataResponse pieces) the same way, read
from the SavedModel's own saved_model.pb, not rebuilt from Python objects.
"""

import os

import numpy as np
import tensorflow as tf

# Imported for its ops (FastBertNormalize, ...): the raw-text SavedModels use them.
import tensorflow_text  # noqa: F401
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from keras_bert_impl.damaged_file_error import damaged_export_file

SAVED_MODEL_FILE = "saved_model.pb"


def _to_dict(message):
    # TF Serving prints proto field names and every field, defaults included ("name": "").
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


class ServableModel:
    """A loaded SavedModel version: `signatures` (name -> input and output specs) and `run`.

    Args:
        name: str. The model name clients use in `/v1/models/NAME`.
        version: int. The version folder it was loaded from.
        path: str. The SavedModel folder (holding saved_model.pb).
        functions: {signature name: function} to call in place of the SavedModel's own
            functions, with the same inputs (as keyword arguments) and outputs: `kbert serve
            --precision int8` runs the int8 conversion of the model the SavedModel was exported
            from. The signatures and the metadata stay the SavedModel's. Default: none.
        load: bool. False: read only saved_model.pb (signatures, metadata) and leave the graph
            and its variables on disk, for `functions` replacing every signature: `kbert serve`
            of LoRA adapters runs them over one shared backbone. Default True.
    """

    # What a call raises for a client's bad input (an id out of range, a failed Assert): a 400.
    input_errors = (tf.errors.InvalidArgumentError,)

    def __init__(self, name, version, path, functions=None, load=True):
        if not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
            raise ValueError(f"{path!r} is not a SavedModel folder: it has no {SAVED_MODEL_FILE}.")
        self.name = name
        self.version = int(version)
        self.path = path
        try:
            with open(os.path.join(path, SAVED_MODEL_FILE), "rb") as f:
                proto = saved_model_pb2.SavedModel.FromString(f.read())
            self._loaded = tf.saved_model.load(path) if load else None
        except (tf.errors.OpError, ValueError, OSError, DecodeError) as e:
            # A variables shard failing its checksum, a cut saved_model.pb: one line naming the folder.
            raise damaged_export_file(path, e, flag="--model") from None
        self._signature_defs = proto.meta_graphs[0].signature_def
        # name -> {"inputs": {input: TensorSpec}, "outputs": {output: TensorSpec}}
        if load:
            self._functions = dict(self._loaded.signatures)
            self.signatures = {name: _function_specs(function) for name, function in self._functions.items()}
        else:
            self.signatures = {
                key: _proto_specs(signature_def)
                for key, signature_def in self._signature_defs.items()
                if not key.startswith("__")  # TF's internal __saved_model_init_op
            }
            self._functions = dict.fromkeys(self.signatures)
            if sorted(functions or {}) != sorted(self.signatures):
                raise ValueError(
                    f"load=False needs functions for every signature of {path!r} "
                    f"({sorted(self.signatures)}). "
                    f"Received: {sorted(functions or {})}"
                )
        if not self._functions:
            raise ValueError(
                f"The SavedModel {path!r} has no serving signature (TF Serving would not serve it)."
            )
        # signature -> whether every input and output is [batch, ...] (TF Serving's batching needs
        # it too): the server merges and splits only those requests, and runs the others whole.
        self.batch_major = {
            signature: all(_batch_major(spec) for group in specs.values() for spec in group.values())
            for signature, specs in self.signatures.items()
        }
        unknown = sorted(set(functions or {}) - set(self._functions))
        if unknown:
            raise ValueError(
                f"functions must replace signatures of {path!r} ({sorted(self._functions)}). "
                f"Received: {unknown}"
            )
        self._calls = {**self._functions, **(functions or {})}

    def metadata(self):
        """The body of TF Serving's `GET /v1/models/NAME[/versions/N]/metadata`."""
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature_def in self._signature_defs.items():
            if key in self._functions:  # not TF's internal __saved_model_init_op
                signature_map.signature_def[key].CopyFrom(signature_def)
        return {
            "model_spec": {"name": self.name, "signature_name": "", "version": str(self.version)},
            "metadata": {"signature_def": _to_dict(signature_map)},
        }

    def status(self):
        """One entry of TF Serving's `model_version_status` list."""
        return {
            "version": str(self.version),
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }

    def run(self, signature, inputs):
        """Calls `signature` on {input name: numpy array}; returns {output name: numpy array}."""
        function = self._calls[signature]
        specs = self.signatures[signature]["inputs"]
        tensors = {key: tf.constant(value, dtype=specs[key].dtype) for key, value in inputs.items()}
        return {key: np.asarray(value) for key, value in function(**tensors).items()}


def _function_specs(function):
    inputs = dict(function.structured_input_signature[1])
    outputs = {k: tf.TensorSpec(v.shape, v.dtype, k) for k, v in function.structured_outputs.items()}
    return {"inputs": inputs, "outputs": outputs}


def _proto_specs(signature_def):
    """A SignatureDef's inputs and outputs as the loaded function's specs (named by their keys)."""

    def spec(key, info):
        shape = (
            None
            if info.tensor_shape.unknown_rank
            else [d.size if d.size >= 0 else None for d in info.tensor_shape.dim]
        )
        return tf.TensorSpec(shape, tf.dtypes.as_dtype(info.dtype), key)

    return {
        group: {key: spec(key, info) for key, info in getattr(signature_def, group).items()}
        for group in ("inputs", "outputs")
    }


def _batch_major(spec):
    return spec.shape.rank is not None and spec.shape.rank >= 1 and spec.shape[0] is None


def _latest_version(folder):
    """(version, its folder) of the highest numbered version under `folder`, or None. The folder
    is read as named: TF Serving parses version folder names as integers, so `007` is version 7."""
    if not os.path.isdir(folder):  # a stray file beside the models (.DS_Store): TF Serving skips it
        return None
    versions = [
        (int(n), os.path.join(folder, n))
        for n in os.listdir(folder)
        if n.isdigit() and os.path.isfile(os.path.join(folder, n, SAVED_MODEL_FILE))
    ]
    return max(versions) if versions else None


def find_servables(path, name=None):
    """[(name, version, SavedModel folder)] to serve from `path`, as TF Serving would find them.

    `path` is a `kbert export` folder (every model under its serving/), a model base path
    (numbered version folders: the highest is served, TF Serving's default policy) or one
    SavedModel folder (version 1 unless its folder name is a number). `name` renames the
    model of the last two (default: the base folder's name).
    """
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise ValueError(f"--model {path!r}: no such folder.")
    serving = os.path.join(path, "serving")
    if os.path.isdir(serving):
        found = []
        for model in sorted(os.listdir(serving)):
            latest = _latest_version(os.path.join(serving, model))
            if latest is not None:
                found.append((model, *latest))
        if found:
            return found
    if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
        base, folder = os.path.split(path)
        if folder.isdigit():
            return [(name or os.path.basename(base), int(folder), path)]
        return [(name or folder, 1, path)]
    latest = _latest_version(path)
    if latest is not None:
        return [(name or os.path.basename(path), *latest)]
    raise ValueError(
        f"--model {path!r} holds no SavedModel: pass a kbert export folder, a model folder with numbered "
        "versions (TF Serving's layout), a SavedModel folder, or a kbert finetune run folder."
    )
