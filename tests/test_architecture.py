"""The package's dependency rules (docs/ARCHITECTURE.md), checked on the source's imports.

The layer table and the public API list are read from docs/ARCHITECTURE.md itself: the page is
the one statement of the rules, and this file holds the code to it."""

import ast
import functools
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "keras_bert_impl")
ARCHITECTURE = os.path.join(REPO, "docs", "ARCHITECTURE.md")


def _modules():
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                relative = os.path.relpath(path, os.path.dirname(PACKAGE))[: -len(".py")]
                module = relative.replace(os.sep, ".").removesuffix(".__init__")
                yield module, path


@functools.cache
def _tree(path):
    """A file's syntax tree, parsed once for all the tests here."""
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _imports(path, top_level_only=False):
    """(imported module, [names]) for every import statement of a file, function-level ones
    included unless `top_level_only`."""
    tree = _tree(path)
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]


MODULES = dict(_modules())


def _section(title):
    """The lines of docs/ARCHITECTURE.md's `## title` section."""
    with open(ARCHITECTURE, encoding="utf-8") as f:
        text = f.read()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/ARCHITECTURE.md has no '## {title}' section"
    return match.group(1).splitlines()


def _names(cell):
    return re.findall(r"`([^`]+)`", cell)


def _read_layers():
    """[(layer, entries, may import, backend)], top layer first, from the layer table."""
    lines = _section("Layers: who may import whom")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    assert rows[0] == ["layer", "modules", "may import", "backend"], rows[0]
    layers = []
    for name, modules, may_import, backend in rows[2:]:
        below = [row[0] for row in rows[2 + len(layers) + 1 :]]
        if may_import.startswith("every layer below"):
            but = may_import.removeprefix("every layer below").removeprefix(" but ")
            excluded = {word.strip() for word in but.split(",")} - {""}
            assert excluded <= set(below), (name, excluded - set(below))
            allowed = set(below) - excluded
        else:
            allowed = set() if may_import == "nothing" else {word.strip() for word in may_import.split(",")}
        layers.append((name, _names(modules), allowed, backend))
    return layers


def _public_api():
    """The modules of docs/ARCHITECTURE.md's public API list."""
    return [_names(line)[0] for line in _section("Public API") if line.startswith("- `")]


def _package_of(module):
    return module.rsplit(".", 1)[0]


def test_every_module_is_seen():
    assert "keras_bert_impl.models.bert_backbone" in MODULES and len(MODULES) > 60


# The Beam DoFns and model handler: the only modules importing apache_beam at their top, and only
# the pipelines' run() imports them, so the library and `kbert --help` never import Beam.
BEAM_MODULES = {
    f"keras_bert_impl.pipelines.{name}"
    for name in ("split_examples", "shard_writer", "shard_reader", "shard_output", "text_model_handler")
}
# Beside pipelines/, the one module that reaches Beam's FileSystems, inside its functions and for a
# remote path (gs://...) only: the data reader and the commands' checks read cloud paths through it.
BEAM_FILE_PATHS = "keras_bert_impl.file_paths"


def test_only_the_pipelines_import_beam_and_only_lazily():
    outside = [
        (m, i)
        for m, path in MODULES.items()
        if not m.startswith("keras_bert_impl.pipelines") and m != BEAM_FILE_PATHS
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
PUBLIC = tuple(_public_api())


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


def test_the_public_api_list_names_modules_of_the_library():
    assert "keras_bert_impl.cli" in PUBLIC and [m for m in PUBLIC if m not in MODULES] == []


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


LITE = os.path.join(os.path.dirname(WING), "keras_bert_lite")
# Every module of the library, of the wing and of keras_bert_lite, by dotted name.
ALL_MODULES = {
    **MODULES,
    **{
        os.path.relpath(path, os.path.dirname(WING))[: -len(".py")]
        .replace(os.sep, ".")
        .removesuffix(".__init__"): path
        for path in _wing_files()
        + [os.path.join(root, n) for root, _, names in os.walk(LITE) for n in names if n.endswith(".py")]
    },
}
# What keras_bert_lite may import besides itself: it runs an export without TensorFlow or Keras.
LITE_IMPORTS = ("numpy", "ai_edge_litert", "contextlib", "json", "numbers", "os", "sys", "tempfile")
# keras_bert_lite.serve, the server: its HTTP stack and the standard library's async and sockets.
LITE_SERVE_IMPORTS = ("uvicorn", "starlette", "prometheus_client") + (
    "asyncio",
    "base64",
    "binascii",
    "collections",
    "concurrent",
    "errno",
    "math",
    "re",
    "signal",
    "socket",
    "time",
    "typing",
)


def test_keras_bert_lite_imports_only_numpy_litert_and_the_standard_library():
    lite = {m: p for m, p in ALL_MODULES.items() if m.split(".")[0] == "keras_bert_lite"}
    assert "keras_bert_lite.wordpiece_tokenizer" in lite and "keras_bert_lite.serve.model_server" in lite
    bad = [
        (module, imported)
        for module, path in lite.items()
        for imported, _ in _imports(path)
        if imported.split(".")[0]
        not in LITE_IMPORTS
        + ("keras_bert_lite",)
        + (LITE_SERVE_IMPORTS if module.startswith("keras_bert_lite.serve") else ())
    ]
    assert not bad, bad


BENCH = os.path.join(REPO, "bench")
# The bench scripts, by dotted name (bench/ is a package run from the repository root).
BENCH_MODULES = {
    os.path.relpath(os.path.join(root, n), REPO)[: -len(".py")]
    .replace(os.sep, ".")
    .removesuffix(".__init__"): (os.path.join(root, n))
    for root, _, names in os.walk(BENCH)
    for n in names
    if n.endswith(".py")
}


def _resolve(name, modules=ALL_MODULES):
    """The module of `modules` that importing `name` runs last: `name` itself, or the
    nearest package or module above it (`a.b.Class` -> `a.b`)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _import_graph(modules=ALL_MODULES):
    """module -> the modules of `modules` it imports, at any level of the file (a function's
    lazy import is an edge too: it runs whenever the function does); relative imports resolved."""
    graph = {}
    for module, path in modules.items():
        tree = _tree(path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(_resolve(alias.name, modules) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                # `from a import b` imports the module a.b when there is one, else names of a.
                edges.update(_resolve(f"{base}.{alias.name}", modules) for alias in node.names)
        graph[module] = edges - {None, module}
    return graph


LAYERS = _read_layers()


def _layer_of(module, layers=LAYERS):
    """The layer whose entry is the longest prefix of `module` (the package root matches only
    itself: every module's name starts with it)."""
    matches = [
        (len(entry), name)
        for name, entries, _, _ in layers
        for entry in entries
        if module == entry or (module.startswith(entry + ".") and entry != "keras_bert_impl")
    ]
    return max(matches)[1] if matches else None


def _upward_imports(graph, layers):
    """(module, imported, its layer, the imported module's layer) for every import the layer
    table does not allow."""
    allowed = {name: may_import for name, _, may_import, _ in layers}
    bad = []
    for module, imported in sorted((m, i) for m, edges in graph.items() for i in edges):
        here, there = _layer_of(module, layers), _layer_of(imported, layers)
        if here == there or there in allowed[here]:
            continue
        bad.append((module, imported, here, there))
    return bad


def test_every_module_has_a_layer():
    """A new package or top-level module gets its row in the table before it lands."""
    modules = {**ALL_MODULES, **BENCH_MODULES}
    assert "bench.perf.forward_gap" in modules and "keras_bert_impl_export.exporter" in modules
    assert [m for m in modules if _layer_of(m) is None] == []


def test_the_layer_table_points_down():
    """Each row may import only rows below it, and a layer that runs on every backend only
    layers that do too: the table itself has no arrow upwards."""
    names = [name for name, _, _, _ in LAYERS]
    assert len(names) == len(set(names)) and len(names) > 10, names
    backend = {name: b for name, _, _, b in LAYERS}
    assert set(backend.values()) == {"any", "TensorFlow"}, backend
    for index, (name, _, may_import, _) in enumerate(LAYERS):
        assert may_import <= set(names[index + 1 :]), (name, may_import - set(names[index + 1 :]))
        if backend[name] == "any":
            assert {backend[other] for other in may_import} <= {"any"}, (name, may_import)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    """Every import of the library, the wing and bench, function-level ones included, goes to
    its own layer or one its row names: the table has no exceptions."""
    graph = _import_graph({**ALL_MODULES, **BENCH_MODULES})
    assert _upward_imports(graph, LAYERS) == []


def test_the_layer_check_sees_an_upward_import():
    layers = [
        ("top", ["pkg.top"], {"low"}, "any"),
        ("mid", ["pkg.mid"], {"low"}, "any"),
        ("low", ["pkg.low", "pkg"], set(), "any"),
    ]
    graph = {"pkg.top.a": {"pkg.low.b", "pkg.mid.c"}, "pkg.low.b": {"pkg.top.a"}, "pkg.mid.c": {"pkg.mid.d"}}
    assert _upward_imports(graph, layers) == [
        ("pkg.low.b", "pkg.top.a", "low", "top"),
        ("pkg.top.a", "pkg.mid.c", "top", "mid"),
    ]
    facade = [("facade", ["keras_bert_impl"], set(), "any")]
    assert _layer_of("keras_bert_impl", facade) == "facade" and _layer_of("keras_bert_impl.x", facade) is None
    assert _layer_of("pkg.low.x", layers) == "low" and _layer_of("pkg.other", layers) == "low"


def test_layers_on_every_backend_import_no_tensorflow_at_module_level():
    """Model code is keras.ops, so it runs on any Keras backend (tests/backends/); a function
    may reach for TensorFlow behind a backend check (MaskedSparseCrossentropy's all-reduce)."""
    any_backend = {name for name, _, _, backend in LAYERS if backend == "any"}
    bad = [
        (module, imported)
        for module, path in MODULES.items()
        if _layer_of(module) in any_backend
        for imported, _ in _imports(path, top_level_only=True)
        if imported.split(".")[0] in ("tensorflow", "tensorflow_text")
    ]
    assert not bad, bad


def test_bench_imports_no_private_name():
    """bench/ measures what a user runs: no private name or module of the library or the wing
    (its row in the layer table keeps it off commands/)."""
    bad = [
        (module, imported, names)
        for module, path in BENCH_MODULES.items()
        for imported, names in _imports(path)
        if imported.split(".")[0] in ("keras_bert_impl", "keras_bert_impl_export")
        if [n for n in names if n.startswith("_")] or [p for p in imported.split(".") if p.startswith("_")]
    ]
    assert len(BENCH_MODULES) > 20 and not bad, bad


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
    assert "keras_bert_lite.serve.model_server" in graph and len(graph) > len(MODULES)
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
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, (ast.Tuple, ast.List, ast.Set))
                and node.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            ):
                if frozenset(e.value for e in node.elts) in names:
                    bad.append(f"{os.path.relpath(path, os.path.dirname(PACKAGE))}:{node.lineno}")
    assert len(files) > 100 and bad == [], bad


def test_commands_only_translate_flags_in_short_functions():
    """The command layer only translates flags: the training skeleton lives in training/, so no
    function in commands/ is over 40 physical lines as ruff formats them (decorators and
    docstring included), and `kbert distill`'s command module fits in 250 lines."""
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
                if node.end_lineno - start + 1 > 40:
                    too_long.append(f"{name}:{node.name} ({node.end_lineno - start + 1} lines)")
        if name == "distill.py":
            assert source.count("\n") <= 250, f"commands/distill.py has {source.count(chr(10))} lines"
    assert not too_long, too_long
