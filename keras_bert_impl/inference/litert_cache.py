"""Converted LiteRT files kept on disk, so a model's conversion is paid once and not by every
process that runs it: `kbert predict` / `evaluate` with `--precision int8` or `--runtime litert`,
and every start of `kbert serve` in those modes. What it saves a whole `kbert predict` process,
and at what peak memory: bench/results/precision_process.json (its `_cached` contenders).
OpenVINO's model cache and ONNX Runtime's optimized-model file do the same for their peers.

Where: `$KBERT_CACHE_DIR/litert`, else `$XDG_CACHE_HOME/keras_bert_impl/litert`, else
`~/.cache/keras_bert_impl/litert`; `KBERT_CACHE_DIR=off` converts every time. The folder keeps
at most `max_bytes` (2 GiB by default: the MiniLM's float32 file is 91 MB, its int8 one 24 MB);
past that the files used longest ago go first.

A file is found again only from everything the conversion reads (`LiteRtCache.key`): the model
class and its Keras config, every weight's name, shape, dtype and bytes, the quantization, the
source of this package (the forms a classifier is converted in live here), and the TensorFlow
and Keras versions (the converter and the layers' lowering). Models with a layer class from
outside keras and keras_bert_impl are never cached: their code is not in the key. The converter
is deterministic here (the same bytes on every conversion of one model), so a cached file is the
file the conversion would make. Each file's name ends in a digest of its bytes, checked on every
read: a damaged file is said, removed and converted again, never run.
"""

import glob
import hashlib
import json
import os
import warnings

import keras
import numpy as np

from keras_bert_impl.atomic_write import write_atomically
from keras_bert_impl.cache_folders import ENVIRONMENT_VARIABLE, OFF, cache_folder, package_source_digest
from keras_bert_impl.validation import check_positive_int

DEFAULT_MAX_BYTES = 2 * 1024**3
# Part of every key: a change in how keys or files are made misses every older file.
CACHE_FORMAT = "litert-cache-1"
# Layer classes whose code the key covers (keras' through its version, ours through the source).
KEYED_MODULES = ("keras.", "keras_bert_impl.")
SUFFIX = ".tflite"


class LiteRtCache:
    """`.tflite` bytes of (model, quantization), from the folder when converted before, else
    from `convert()`, then kept.

    Args:
        folder: where the files are kept (made when first written).
        max_bytes: int. The most the folder's files may take; the least recently used go first.

    Example:
    >>> import tempfile
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> _ = model({"token_ids": np.ones((1, 4), "int32"), "segment_ids": np.zeros((1, 4), "int32"),
    ...            "padding_mask": np.ones((1, 4), "int32")})
    >>> cache = LiteRtCache(tempfile.mkdtemp())
    >>> cache.flatbuffer(model, "float32", lambda: b"converted once")
    b'converted once'
    >>> cache.flatbuffer(model, "float32", lambda: b"not called: found")
    b'converted once'
    """

    def __init__(self, folder, max_bytes=DEFAULT_MAX_BYTES):
        if not isinstance(folder, (str, os.PathLike)) or not os.fspath(folder):
            raise ValueError(f"folder must be a path. Received: folder={folder!r}")
        self.folder = os.path.abspath(os.fspath(folder))
        self.max_bytes = check_positive_int("max_bytes", max_bytes)
        # What the last `flatbuffer` call did: "hit", "miss" (converted and kept) or "uncached",
        # and the kept file it read or wrote (None: none).
        self.last = None
        self.path = None

    @classmethod
    def from_environment(cls, environ=None):
        """The cache `KBERT_CACHE_DIR` names (its `litert` folder), the user cache folder's when
        it is unset or empty, or None for `KBERT_CACHE_DIR=off`."""
        folder = cache_folder("litert", environ)
        return None if folder is None else cls(folder)

    def key(self, model, quantization):
        """The hex digest naming (model, quantization)'s file; None for a model with a layer class
        the key cannot cover (`keyable`)."""
        if not keyable(model):
            return None
        digest = hashlib.sha256()
        config = json.dumps(keras.saving.serialize_keras_object(model), sort_keys=True, default=repr)
        import tensorflow as tf

        for part in (
            CACHE_FORMAT,
            quantization,
            f"{type(model).__module__}.{type(model).__qualname__}",
            config,
            tf.__version__,
            keras.__version__,
            package_source_digest(),
        ):
            digest.update(part.encode("utf-8") + b"\0")
        for weight in model.weights:  # weights in tracking order; names, shapes and bytes
            value = np.ascontiguousarray(weight.numpy())
            digest.update(f"{weight.path}|{value.dtype.str}|{value.shape}".encode("utf-8") + b"\0")
            digest.update(value.tobytes())
        return digest.hexdigest()

    def flatbuffer(self, model, quantization, convert):
        """The .tflite bytes of `model` in `quantization`: the kept file's when there is one
        whose bytes match its digest, else `convert()`'s (kept for the next process)."""
        key = self.key(model, quantization)
        self.path = None
        if key is None:
            self.last = "uncached"
            return convert()
        found = self._read(key)
        if found is not None:
            self.last = "hit"
            return found
        content = convert()
        self._write(key, content)
        self.last = "miss"
        return content

    def _read(self, key):
        for path in sorted(glob.glob(os.path.join(glob.escape(self.folder), f"{key}.*{SUFFIX}"))):
            try:
                with open(path, "rb") as f:
                    content = f.read()
            except FileNotFoundError:
                continue  # another process's size cap removed it after the glob: simply not kept
            except OSError as e:
                warnings.warn(
                    f"LiteRT cache: could not read {path} ({e}); converting the model instead.", stacklevel=3
                )
                continue
            if path.endswith(f".{_content_digest(content)}{SUFFIX}"):
                try:
                    os.utime(path)  # used now: the last the size cap removes
                except OSError:
                    pass  # a read-only cache still serves its files
                self.path = path
                return content
            warnings.warn(
                f"LiteRT cache: {path} does not match the digest in its name (the file is damaged); "
                "removing it and converting the model again.",
                stacklevel=3,
            )
            _remove(path)
        return None

    def _write(self, key, content):
        path = os.path.join(self.folder, f"{key}.{_content_digest(content)}{SUFFIX}")

        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(content)

        try:
            write_atomically(path, write, suffix=SUFFIX)
        except OSError as e:
            warnings.warn(
                f"LiteRT cache: could not keep the converted model in {self.folder} ({e}); it runs, "
                f"but the next process converts it again. Set {ENVIRONMENT_VARIABLE} to a writable folder, "
                f"or to {OFF}.",
                stacklevel=3,
            )
            return
        self.path = path
        self._trim(keep=path)

    def _trim(self, keep):
        """Removes the least recently used files until the folder's fit in max_bytes (never `keep`,
        the file just written, even when it alone is larger)."""
        files = []
        for path in glob.glob(os.path.join(glob.escape(self.folder), f"*{SUFFIX}")):
            try:
                stat = os.stat(path)
            except OSError:
                continue  # removed by another process meanwhile
            files.append((stat.st_mtime, path, stat.st_size))
        total = sum(size for _, _, size in files)
        for _, path, size in sorted(files):
            if total <= self.max_bytes:
                break
            if path != keep:  # glob's "*" skips write_atomically's ".tmp-" files
                _remove(path)
                total -= size


def keyable(model):
    """Whether every layer of `model` (itself included) is a class of keras or keras_bert_impl,
    whose code the key covers through their versions and source."""
    return all(
        type(layer).__module__.startswith(KEYED_MODULES)
        for layer in model._flatten_layers(include_self=True, recursive=True)
    )


def _content_digest(content):
    return hashlib.sha256(content).hexdigest()[:16]


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as e:  # a read-only cache, another user's file: the model still runs
        warnings.warn(f"LiteRT cache: could not remove {path} ({e}).", stacklevel=4)
