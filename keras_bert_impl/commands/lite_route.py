"""`kbert predict` of a run folder without TensorFlow, once that run folder has run there on LiteRT.

Where a run folder's classifier runs on LiteRT (`--precision int8`, `--runtime litert`, or auto's
int8), what the process ran is a kept .tflite file (inference/litert_cache.py), the vocabulary, the
casing and the label names; TensorFlow and Keras were needed only to decide that and to convert
(`import tensorflow` alone is seconds and hundreds of MiB: bench/results/lite_process.json).
`LiteRoute` keeps that outcome beside the file, as a folder `keras_bert_lite.LiteTextClassifier`
opens, keyed by everything it was made from: the bytes of model.keras and of the run's task.json,
the flags that choose what runs (--precision, --runtime, --seq-len, whether --text-b was given),
this CPU (auto's choice and the resolver's notes depend on it), the source of keras_bert_impl and
the versions of TensorFlow, Keras and ai-edge-litert. The next process whose key matches runs the
same file on keras_bert_lite (its tokenizer gives BertPreprocessor's ids: tests/lite) and says the
same note; one whose key does not, or whose file the cache has removed or finds damaged, takes the
TensorFlow path, which keeps the route again.

Imports nothing heavy: `cli.main` asks `LiteRoute.find` before it loads TensorFlow.
"""

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import warnings

from keras_bert_impl.file_paths import sha256
from keras_bert_impl.cache_folders import ENVIRONMENT_VARIABLE, cache_folder, package_source_digest
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS

ROUTES = "litert-routes"
# Part of every key: a change in how keys or routes are made misses every older route.
ROUTE_FORMAT = "litert-route-1"
MANIFEST = "export.json"  # keras_bert_lite's name: a route is the folder it opens
VOCABULARY = "vocab.txt"
MODEL_FILE = "model.keras"
TASK_FILE = "task.json"
CLASSIFIER_TASKS = ("classification", "pair", "multilabel")
VERSIONED = ("tensorflow", "keras", "ai-edge-litert")


class LiteRoute:
    """What `kbert predict --model RUN` with these flags ran on LiteRT, kept for the next process.

    Args:
        folder: the route's folder (its export.json, vocab.txt).
        model_path: the run's model.keras (or the .keras file given).

    Use `LiteRoute.of(args)` (None where no route can apply: the cache is off, --model is not a
    run folder or .keras file) for the route of a command's flags, `found()` for whether it is
    kept and whole, `keep(...)` to keep it after a run on LiteRT.
    """

    def __init__(self, folder, model_path):
        self.folder = folder
        self.model_path = model_path

    @classmethod
    def of(cls, args, environ=None):
        """The route of `kbert predict`'s `args`, or None where none applies: the flags cannot run
        on LiteRT (fp32 or bf16 on TensorFlow: nothing to hash the model for), the cache is off,
        --model is no run folder or .keras file, a Beam runner."""
        on_litert = args.runtime == "litert" or args.precision in ("int8", "auto")
        root = cache_folder(ROUTES, environ)
        model_path = _model_path(getattr(args, "model", None))
        if not on_litert or root is None or model_path is None or getattr(args, "runner", "local") != "local":
            return None
        return cls(os.path.join(root, _key(args, model_path)), model_path)

    @classmethod
    def find(cls, args):
        """`args`' route when it is kept and its file is whole, else None; remembered on `args`
        (`args.lite_route`) for the command, as cli.main asks first."""
        if not hasattr(args, "lite_route"):
            route = cls.of(args)
            args.lite_route = route if route is not None and route.found() else None
        return args.lite_route

    def found(self):
        """Whether the route is kept and the .tflite file it names is there with the bytes its
        name's digest says (the LiteRT cache names each file by its content)."""
        manifest = self.manifest()
        if manifest is None:
            return False
        (path,) = manifest["files"].values()
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError:
            return False  # removed by the cache's size cap: the TensorFlow path converts it again
        return path.endswith(f".{hashlib.sha256(content).hexdigest()[:16]}.tflite")

    def manifest(self):
        """The route's export.json, or None (not kept, or not readable)."""
        try:
            with open(os.path.join(self.folder, MANIFEST), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def keep(self, setup, predictor):
        """Keeps what `predictor` (the TextPredictor of `setup`, an InferenceSetup) ran, where it
        ran a plain classifier's kept LiteRT file; anything else keeps nothing. A folder that
        cannot be written is a warning: the command's output is not affected."""
        from keras_bert_impl.models import BertClassifier

        forward = predictor.forward
        path = getattr(forward, "cache_path", None)
        if type(setup.model) is not BertClassifier or setup.task not in CLASSIFIER_TASKS or path is None:
            return False
        try:
            self._write(_manifest(self.model_path, setup, forward, path), setup.model.backbone.vocabulary)
            _remove_dead_routes(os.path.dirname(self.folder))
        except OSError as e:
            warnings.warn(
                f"LiteRT cache: could not keep the route to {path} in {self.folder} ({e}); the next "
                f"kbert predict of this run loads TensorFlow again. Set {ENVIRONMENT_VARIABLE} to a "
                "writable folder.",
                stacklevel=2,
            )
            return False
        return True

    def _write(self, manifest, vocabulary):
        """The route's folder, whole or not at all: written beside it, then renamed."""
        os.makedirs(os.path.dirname(self.folder), exist_ok=True)
        work = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(self.folder))
        try:
            with open(os.path.join(work, VOCABULARY), "w", encoding="utf-8") as f:
                f.write("".join(f"{token}\n" for token in vocabulary))
            with open(os.path.join(work, MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
            shutil.rmtree(self.folder, ignore_errors=True)  # a stale route (its file was removed)
            os.replace(work, self.folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _manifest(model_path, setup, forward, path):
    """The route's export.json: what LiteTextClassifier reads of an export's, the resolver's note."""
    model, backbone = setup.model, setup.model.backbone
    ids, segments, mask = MODEL_ID_INPUTS  # LiteTextClassifier reads ids, mask, segments
    return {
        "head": "classifier",
        "route": ROUTE_FORMAT,
        "model": model_path,
        "note": setup.note,
        "quantization": forward.quantization,
        "sequence_length": setup.seq_len,
        "max_sequence_length": backbone.max_sequence_length,
        "lowercase": bool(backbone.lowercase),
        "pair": setup.task == "pair",
        "multi_label": setup.task == "multilabel",
        "id_inputs": [ids, mask, segments],
        "id_outputs": list(forward.output_names),
        "label_names": list(model.label_names or [str(i) for i in range(model.num_classes)]),
        "files": {f"tflite_{forward.quantization}": path},
    }


def _remove_dead_routes(root):
    """Removes the routes whose file the LiteRT cache has removed (its size cap), so that the
    routes take no more room than the files they name."""
    for name in os.listdir(root):
        route = LiteRoute(os.path.join(root, name), None)
        manifest = route.manifest()
        if manifest is not None and not all(os.path.isfile(p) for p in manifest["files"].values()):
            shutil.rmtree(route.folder, ignore_errors=True)


def _model_path(model):
    """The .keras file of a run folder or .keras path (load_model's rule), or None."""
    if not isinstance(model, str):
        return None
    if os.path.isdir(model) and os.path.isfile(os.path.join(model, MODEL_FILE)):
        return os.path.abspath(os.path.join(model, MODEL_FILE))
    if os.path.isfile(model) and model.endswith(".keras"):
        return os.path.abspath(model)
    return None


def _key(args, model_path):
    from keras_bert_impl.cpu_features import CpuFeatures

    digest = hashlib.sha256()
    flags = {
        "precision": args.precision,
        "runtime": args.runtime,
        "seq_len": args.seq_len,
        "text_b": bool(args.text_b),
    }
    task_file = os.path.join(os.path.dirname(model_path), TASK_FILE)
    for part in (
        ROUTE_FORMAT,
        sha256(model_path),
        sha256(task_file) if os.path.isfile(task_file) else "no task file",
        json.dumps(flags, sort_keys=True),
        json.dumps(CpuFeatures.of_this_machine().to_dict(), sort_keys=True),
        package_source_digest(),
        *(_version(name) for name in VERSIONED),
    ):
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()


def _version(name):
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{name} none"
