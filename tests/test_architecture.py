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
        (
            "keras_bert_impl.layers",
            ("tensorflow", "tensorflow_text", "keras_bert_impl.tokenization.bert_preprocessor"),
        ),
        (
            "keras_bert_impl.models",
            ("tensorflow", "tensorflow_text", "keras_bert_impl.tokenization.bert_preprocessor"),
        ),
        # The optimizer, its schedule and the callbacks run on every backend too (tests/backends/):
        # tf.distribute is reached inside functions, on the TensorFlow backend only.
        (
            "keras_bert_impl.training",
            (
                "tensorflow",
                "tensorflow_text",
                "keras_bert_impl.tokenization.bert_preprocessor",
                "keras_bert_impl.data",
            ),
        ),
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
        ("keras_bert_impl.pipelines", ("keras_bert_impl.commands", "keras_bert_impl.cli")),
        # The conversion home is library: --precision int8 converts without the export wing.
        (
            "keras_bert_impl.conversion",
            ("keras_bert_impl.commands", "keras_bert_impl.cli", "keras_bert_impl_export"),
        ),
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


# The Beam DoFns and model handler: the only modules importing apache_beam at their top, and only
# the pipelines' run() imports them, so the library and `kbert --help` never import Beam.
BEAM_MODULES = {
    f"keras_bert_impl.pipelines.{name}"
    for name in ("split_examples", "shard_writer", "shard_reader", "shard_output", "text_model_handler")
}


def test_only_the_pipelines_import_beam_and_only_lazily():
    outside = [
        (m, i)
        for m, path in MODULES.items()
        if not m.startswith("keras_bert_impl.pipelines")
        for i, _ in _imports(path)
        if i.split(".")[0] == "apache_beam"
    ]
    assert not outside, outside
    top_level = [
        (m, i)
        for m, path in MODULES.items()
        if m not in BEAM_MODULES
        for i, _ in _imports(path, top_level_only=True)
        if i.split(".")[0] == "apache_beam"
    ]
    assert not top_level, top_level
    assert all(m in MODULES for m in BEAM_MODULES)
    importers = {
        m for m, path in MODULES.items() for i, _ in _imports(path, top_level_only=True) if i in BEAM_MODULES
    }
    assert importers <= BEAM_MODULES, importers


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
    "keras_bert_impl",
    "keras_bert_impl.layers",
    "keras_bert_impl.models",
    "keras_bert_impl.tokenization",
    "keras_bert_impl.data",
    "keras_bert_impl.data.readers",
    "keras_bert_impl.training",
    "keras_bert_impl.checkpoints",
    "keras_bert_impl.evaluation",
    "keras_bert_impl.validation",
    "keras_bert_impl.distillation_defaults",
    "keras_bert_impl.atomic_write",
    "keras_bert_impl.damaged_file_error",
    "keras_bert_impl.backend_support",
    "keras_bert_impl.cli",
    "keras_bert_impl.conversion.tflite_converter",
    "keras_bert_impl.conversion.input_contract",
    "keras_bert_impl.tensor_names",
    "keras_bert_impl.conversion.integer_only",
    "keras_bert_impl.conversion.native_log",
    "keras_bert_impl.conversion.tflite_targets",
    "keras_bert_impl.cpu_features",
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


def _wing_files():
    return [os.path.join(root, n) for root, _, names in os.walk(WING) for n in names if n.endswith(".py")]


def test_the_export_wing_uses_the_public_api_only():
    files = _wing_files()
    assert len(files) > 3 and any(os.sep + "serve" + os.sep in f for f in files)
    bad = [
        (os.path.basename(path), imported, names)
        for path in files
        for imported, names in _imports(path)
        if imported.startswith("keras_bert_impl.") or imported == "keras_bert_impl"
        if imported not in PUBLIC or [n for n in names if n.startswith("_")]
    ]
    assert not bad, bad


# Every module of the library and of the wing, by dotted name.
ALL_MODULES = {
    **MODULES,
    **{
        os.path.relpath(path, os.path.dirname(WING))[: -len(".py")]
        .replace(os.sep, ".")
        .removesuffix(".__init__"): path
        for path in _wing_files()
    },
}


def _resolve(name):
    """The module of ALL_MODULES that importing `name` runs last: `name` itself, or the
    nearest package or module above it (`a.b.Class` -> `a.b`)."""
    while name and name not in ALL_MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph():
    """module -> the modules of ALL_MODULES it imports, at any level of the file (a function's
    lazy import is an edge too: it runs whenever the function does); relative imports resolved."""
    graph = {}
    for module, path in ALL_MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(_resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                # `from a import b` imports the module a.b when there is one, else names of a.
                edges.update(_resolve(f"{base}.{alias.name}") for alias in node.names)
        graph[module] = edges - {None, module}
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    """No chain of imports, function-level ones included, leads from a module of the library
    or the wing back to itself (`kbert serve` once re-entered the CLI to re-parse an export)."""
    graph = _import_graph()
    assert "keras_bert_impl_export.serve.model_server" in graph and len(graph) > len(MODULES)
    assert _cycles(graph) == []


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_command_imports_the_cli():
    """The commands are called by the CLI, never the reverse: a command that needs another's
    work calls its function (serve -> export.load_for_export and write_export), not the parser."""
    bad = [
        (module, imported)
        for module, path in MODULES.items()
        if module.startswith("keras_bert_impl.commands")
        for imported, names in _imports(path)
        if imported == "keras_bert_impl.cli" or (imported == "keras_bert_impl" and "cli" in names)
    ]
    assert not bad, bad


def test_one_module_converts_to_tflite():
    """Every .tflite the library and the wing write goes through conversion.tflite_converter:
    it is the one module that names TFLite's converter."""
    users = sorted(
        module
        for module, path in ALL_MODULES.items()
        if "TFLiteConverter" in open(path, encoding="utf-8").read()
    )
    assert users == ["keras_bert_impl.conversion.tflite_converter"]


def test_the_id_input_names_are_defined_once():
    """MODEL_ID_INPUTS (the Keras models' token_ids, segment_ids, padding_mask) and
    EXPORT_ID_INPUTS (every exported id graph's ids, mask, segment_ids) are spelled out only in
    tensor_names.py: no module of the library, the wing or bench writes either
    set of names as its own tuple, list or set (once `ID_INPUTS` meant one in int8_forward.py
    and the other in the serving model)."""
    from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, MODEL_ID_INPUTS

    contract = os.path.join(PACKAGE, "tensor_names.py")
    bench = os.path.join(os.path.dirname(PACKAGE), "bench")
    files = [
        *MODULES.values(),
        *_wing_files(),
        *(os.path.join(root, n) for root, _, names in os.walk(bench) for n in names if n.endswith(".py")),
    ]
    names = {frozenset(MODEL_ID_INPUTS), frozenset(EXPORT_ID_INPUTS)}
    bad = []
    for path in files:
        if path == contract:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.Tuple, ast.List, ast.Set))
                and node.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            ):
                if frozenset(e.value for e in node.elts) in names:
                    bad.append(f"{os.path.relpath(path, os.path.dirname(PACKAGE))}:{node.lineno}")
    assert len(files) > 100 and bad == [], bad


def test_commands_only_translate_flags_in_short_functions():
    """Issue 29's bound on the command layer: the training skeleton lives in training/, so no
    function in commands/ is over 60 physical lines (decorators and docstring included) and
    `kbert distill` fits in 250 lines."""
    commands = os.path.join(PACKAGE, "commands")
    too_long = []
    for name in sorted(os.listdir(commands)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(commands, name), encoding="utf-8") as f:
            source = f.read()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - start + 1 > 60:
                    too_long.append(f"{name}:{node.name} ({node.end_lineno - start + 1} lines)")
        if name == "distill.py":
            assert source.count("\n") <= 250, f"commands/distill.py has {source.count(chr(10))} lines"
    assert not too_long, too_long
