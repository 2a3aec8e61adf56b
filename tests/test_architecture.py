"""The package's dependency rules (docs/ARCHITECTURE.md), checked on the source's imports."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "keras_bert_impl")


def _modules():
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                relative = os.path.relpath(path, os.path.dirname(PACKAGE))[: -len(".py")]
                module = relative.replace(os.sep, ".").removesuffix(".__init__")
                yield module, path


def _imports(path, top_level_only=False):
    """(imported module, [names]) for every import statement of a file, function-level ones
    included unless `top_level_only`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]


MODULES = dict(_modules())


def _package_of(module):
    return module.rsplit(".", 1)[0]


def test_every_module_is_seen():
    assert "keras_bert_impl.models.bert_backbone" in MODULES and len(MODULES) > 60


@pytest.mark.parametrize(
    "package, forbidden",
    [
        # Reading vocab.txt is tokenization's job; checkpoints sit above it, never below.
        ("keras_bert_impl.tokenization", ("keras_bert_impl.checkpoints",)),
        # Model code is keras.ops only, so it runs on any Keras backend (a function may
        # reach for TensorFlow behind a backend check: MaskedSparseCrossentropy's all-reduce).
        ("keras_bert_impl.layers", ("tensorflow", "tensorflow_text", "keras_bert_impl.tokenization.bert_preprocessor")),
        ("keras_bert_impl.models", ("tensorflow", "tensorflow_text", "keras_bert_impl.tokenization.bert_preprocessor")),
        # The optimizer, its schedule and the callbacks run on every backend too (tests/backends/):
        # tf.distribute is reached inside functions, on the TensorFlow backend only.
        ("keras_bert_impl.training", ("tensorflow", "tensorflow_text", "keras_bert_impl.tokenization.bert_preprocessor",
                                      "keras_bert_impl.data")),
        # Only the CLI's own modules import the commands.
        ("keras_bert_impl.layers", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.models", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.data", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.training", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.tokenization", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.checkpoints", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.evaluation", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.inspection", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        ("keras_bert_impl.inference", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
    ],
)
def test_layering(package, forbidden):
    top_level_only = "tensorflow" in forbidden
    bad = [
        (module, imported)
        for module, path in MODULES.items()
        if module == package or module.startswith(package + ".")
        for imported, _ in _imports(path, top_level_only)
        if any(imported == f or imported.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, bad


def test_no_private_names_cross_packages():
    """`from a.b import _x` only inside package a (a module's private helpers are its package's business)."""
    bad = []
    for module, path in MODULES.items():
        for imported, names in _imports(path):
            if not imported.startswith("keras_bert_impl"):
                continue
            is_package = imported in MODULES and os.path.basename(MODULES[imported]) == "__init__.py"
            source_package = imported if is_package else _package_of(imported)
            private = [n for n in names if n.startswith("_")]
            private_module = [p for p in imported.split(".") if p.startswith("_")]
            if (private or private_module) and not _package_of(module).startswith(source_package):
                bad.append((module, imported, private))
    assert not bad, bad


WING = os.path.join(os.path.dirname(PACKAGE), "export", "keras_bert_impl_export")
# The library's public API: what these packages' __init__ files export, and these modules.
PUBLIC = (
    "keras_bert_impl", "keras_bert_impl.layers", "keras_bert_impl.models", "keras_bert_impl.tokenization",
    "keras_bert_impl.data", "keras_bert_impl.data.readers", "keras_bert_impl.training", "keras_bert_impl.checkpoints",
    "keras_bert_impl.evaluation", "keras_bert_impl.validation", "keras_bert_impl.distillation_defaults",
    "keras_bert_impl.atomic_write", "keras_bert_impl.damaged_file_error", "keras_bert_impl.backend_support",
    "keras_bert_impl.cli",
)


DOORS = ("keras_bert_impl.commands.export", "keras_bert_impl.commands.serve")


def test_only_kbert_export_and_serve_reach_the_export_wing():
    """The export wing depends on the library, never the other way round; the command modules
    of `kbert export` and `kbert serve` are the doors (function-level imports)."""
    bad = [
        (module, imported)
        for module, path in MODULES.items()
        for imported, _ in _imports(path)
        if imported.startswith("keras_bert_impl_export") and module not in DOORS
    ]
    assert not bad, bad
    for door in DOORS:
        top_level = [i for i, _ in _imports(MODULES[door], top_level_only=True)]
        assert not [i for i in top_level if i.startswith("keras_bert_impl_export")], (door, top_level)


def test_the_export_wing_uses_the_public_api_only():
    files = [os.path.join(WING, n) for n in os.listdir(WING) if n.endswith(".py")]
    assert len(files) > 3
    bad = [
        (os.path.basename(path), imported, names)
        for path in files
        for imported, names in _imports(path)
        if imported.startswith("keras_bert_impl.") or imported == "keras_bert_impl"
        if imported not in PUBLIC or [n for n in names if n.startswith("_")]
    ]
    assert not bad, bad
