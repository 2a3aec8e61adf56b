"""Google's original BERT tokenization and SQuAD feature code (pip bert-tensorflow 1.0.4), as references.

Both files define absl flags at import (`tokenization.py`: --preserve_unused_tokens;
`run_squad.py`: all of its command line), which would clash with other tests
and need parsed flags. So only their class and function definitions are taken
from the parsed source, unmodified, and executed with `tf` = tf.compat.v1 and
`FLAGS` a plain namespace holding the defaults.
"""

import ast
import collections
import importlib.util
import json
import math
import os
import re
import types
import unicodedata

import six
import tensorflow as tf

_CACHE = {}


def _definitions(relpath, names=None):
    spec = importlib.util.find_spec("bert")
    if spec is None:
        raise ImportError("bert-tensorflow is not installed: pip install -e '.[dev]'")
    path = os.path.join(os.path.dirname(spec.origin), relpath)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    defs = [
        n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and (names is None or n.name in names)
    ]
    return path, ast.Module(body=defs, type_ignores=[])


def google_tokenization():
    """Namespace with Google's FullTokenizer, BasicTokenizer, WordpieceTokenizer."""
    if "tokenization" not in _CACHE:
        path, module = _definitions("tokenization.py")
        ns = {
            "collections": collections,
            "re": re,
            "unicodedata": unicodedata,
            "six": six,
            "tf": tf.compat.v1,
            "FLAGS": types.SimpleNamespace(preserve_unused_tokens=False),
            "_UNUSED_TOKEN_RE": re.compile(r"^\[unused\d+\]$"),
            "__name__": "google_bert_tokenization",
        }
        exec(compile(module, path, "exec"), ns)  # noqa: S102
        _CACHE["tokenization"] = types.SimpleNamespace(
            **{k: v for k, v in ns.items() if not k.startswith("__")}
        )
    return _CACHE["tokenization"]


_SQUAD_NAMES = (
    "SquadExample",
    "InputFeatures",
    "read_squad_examples",
    "convert_examples_to_features",
    "_improve_answer_span",
    "_check_is_max_context",
)


def google_squad_features(
    path, vocab_file, do_lower_case, max_seq_length, doc_stride, max_query_length, version_2
):
    """Google's run_squad.py training features (is_training=True) for a SQuAD file."""
    src, module = _definitions("run_squad.py", _SQUAD_NAMES)
    ns = {
        "collections": collections,
        "json": json,
        "math": math,
        "six": six,
        "tf": tf.compat.v1,
        "tokenization": google_tokenization(),
        "FLAGS": types.SimpleNamespace(version_2_with_negative=version_2),
        "__name__": "google_run_squad",
    }
    exec(compile(module, src, "exec"), ns)  # noqa: S102
    tokenizer = ns["tokenization"].FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    examples = ns["read_squad_examples"](path, is_training=True)
    features = []
    verbosity = tf.compat.v1.logging.get_verbosity()
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)  # it logs its first 20 examples
    try:
        ns["convert_examples_to_features"](
            examples, tokenizer, max_seq_length, doc_stride, max_query_length, True, features.append
        )
    finally:
        tf.compat.v1.logging.set_verbosity(verbosity)
    return examples, features
