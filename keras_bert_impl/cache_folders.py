"""Where keras_bert_impl keeps what it computed once for the next process, and the digest of its
own source that every kept file's key includes. Imports nothing heavy: a process that never
loads TensorFlow (`kbert predict` of a run folder whose LiteRT file is kept) reads it too.

`$KBERT_CACHE_DIR/KIND`, else `$XDG_CACHE_HOME/keras_bert_impl/KIND`, else
`~/.cache/keras_bert_impl/KIND`; `KBERT_CACHE_DIR=off` keeps nothing.
"""

import functools
import hashlib
import os

ENVIRONMENT_VARIABLE = "KBERT_CACHE_DIR"
OFF = "off"


def cache_folder(kind, environ=None):
    """The folder of `kind` ("litert", "litert-routes") under the cache `environ` names (default:
    this process's environment), or None for `KBERT_CACHE_DIR=off`.

    >>> cache_folder("litert", {"XDG_CACHE_HOME": "/x"})
    '/x/keras_bert_impl/litert'
    >>> cache_folder("litert", {"KBERT_CACHE_DIR": " OFF "}) is None
    True
    """
    environ = os.environ if environ is None else environ
    chosen = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        root = chosen
    else:
        base = environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "keras_bert_impl")
    return os.path.join(root, kind)


@functools.lru_cache(maxsize=1)
def package_source_digest():
    """sha256 of every .py file of keras_bert_impl, its path included (read once per process)."""
    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode("utf-8") + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read() + b"\0")
    return digest.hexdigest()
