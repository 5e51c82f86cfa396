"""The shape of the code: imports run one way without circles, result.json's keys and the pair
types each have one home, and a run's training config is read through its one typed parse.

Every module of ``cl_diag`` is parsed, not imported, and each of its imports is read, at
module level and inside functions (a late import is still an arrow). The rules:

(a) no module outside the command line (``cl_diag/cli``, and ``python -m cl_diag``) imports
    ``cl_diag.cli``;
(b) each module imports only from its own layer or a layer below (:data:`LAYERS`, the one
    map of the layers; docs/architecture.md explains it);
(c) no module but the result model's (``cl_diag/result/``) spells a key path of result.json
    as a tuple or list of string literals: the typed result model reads and writes those keys;
(d) no circle of imports among cl_diag's modules (:func:`import_cycles`). The graph is the one
    of rule (b): imports at module level, inside functions (late imports) and under
    ``TYPE_CHECKING`` all count. A late import only postpones a circle to run time (that is
    how report/analysis, report/comparison and report/findings (now report/claims) once
    imported each other), and a ``TYPE_CHECKING`` import is a dependency of the code's
    meaning all the same;
(e) no report, finding or theory function (:data:`CONFIG_READERS`: the modules of
    ``cl_diag/report`` and ``cl_diag/measurement/theory.py``) takes a training config as a dict
    or reads one of its keys (:func:`dict_config_reads`): they take the
    :class:`cl_diag.runconfig.RunConfig` that :func:`cl_diag.runconfig.parse_run_config` made,
    and read its typed fields;
(f) no module of measurement, orchestration or report builds a block of result.json as a dict
    literal (:func:`block_literals`): they build the typed blocks of ``cl_diag.result``;
(g) no module but ``cl_diag/vocabulary.py`` spells a pair type (:func:`pair_type_strings`):
    the others name them through ``PairType``;
(h) two modules share a basename only as one concept at two layers, each docstring naming the
    other (:func:`shared_name_offenders`).
"""

from __future__ import annotations

import ast
import itertools
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cl_diag.result import Result, json_schema
from cl_diag.vocabulary import NEGATIVE_TYPES, PAIR_TYPES

PACKAGE = Path(__file__).resolve().parent.parent / "cl_diag"

#: The layers of cl_diag, top to bottom. A module may import from its own layer and from any
#: layer below it, never from a layer above. An entry is a top-level unit of the package: a
#: subpackage, or a module directly under cl_diag/ ("cl_diag" is the package's own
#: __init__, which exposes the Python API of "api"). "integrations" (adapters to other
#: frameworks) uses the library as a user would, from the top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "__main__", "cl_diag", "api", "integrations"),
    # recipes merges recipe files into a command's options: the commands' layer
    ("orchestration", "recipes"),
    ("report", "training"),
    ("models",),
    ("measurement", "losses"),
    (
        "io",
        "errors",
        "result",
        "runconfig",
        "vocabulary",
        "options",
        "trainconfig",
        "runtime",
        "environment",
        "upcalls",
        "version",
    ),
)

#: The command line: the only units that may import cl_diag.cli.
CLI = ("cli", "__main__")

#: result.json's top-level keys (the keys the typed model declares).
RESULT_KEYS = frozenset(Result.json_keys())

#: every block of result.json (a record class of the model) -> its keys and, of those, the keys
#: that hold a block themselves (``histogram``, ``by_class``, ``geometry``, ...)
_DEFS = json_schema()["$defs"]
BLOCK_KEYS = {name: frozenset(block["properties"]) for name, block in _DEFS.items()}
BLOCK_VALUED = {
    name: frozenset(k for k, v in block["properties"].items() if "$ref" in str(v))
    for name, block in _DEFS.items()
}
#: torch's device types: a dict keyed by them alone is a per-device table (``{"cpu": 1024,
#: "cuda": 8192}``), though "cpu" and "cuda" are also keys of the environment fingerprint
DEVICE_TYPES = frozenset({"cpu", "cuda", "mps"})
#: the units whose dict literals must not be blocks of result.json (rule f)
BUILDERS = ("measurement", "orchestration", "report")

#: the pair types' spellings (rule g): their result.json keys and the monitor's column
#: prefixes of the negative types; "pos" is left out, a word with other meanings (an RNG state)
PAIR_TYPE_NAMES = frozenset(
    [kind.value for kind in PAIR_TYPES] + [kind.short for kind in NEGATIVE_TYPES]
)
#: names distinctive enough to be found inside longer strings ("cross_neg_mean"); "positive"
#: is a pair type only as a whole string
_EMBEDDED_PAIR_TYPE = re.compile(
    r"(?<![A-Za-z])(" + "|".join(sorted(PAIR_TYPE_NAMES - {"positive"})) + r")(?![A-Za-z])"
)


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    """``cl_diag.models.subject`` -> ``models``; ``cl_diag`` -> ``cl_diag``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of cl_diag (not a name one defines)."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def imports_of(source: str, module: str, *, is_package: bool = False) -> list[tuple[str, int]]:
    """``(imported cl_diag module, line)`` for every import in ``source``, at any depth.

    ``module`` is the dotted name of the file (for relative imports). ``from P import x``
    imports the module ``P.x`` when there is one, else ``P``; ``import cl_diag`` and ``from
    cl_diag import __version__`` import the package root (the top layer: the version's home is
    ``cl_diag.version``); ``importlib.import_module("cl_diag.x")`` with a literal name imports
    ``cl_diag.x`` as a statement would.
    """
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "cl_diag" or alias.name.startswith("cl_diag."):
                    found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "cl_diag" and not target.startswith("cl_diag."):
                continue
            targets: list[str] = []
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                name = sub if _is_module(sub) else target
                if name not in targets:
                    targets.append(name)
            found += [(name, node.lineno) for name in targets]
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                name = first.value
                if name == "cl_diag" or name.startswith("cl_diag."):
                    found.append((name, node.lineno))
    return found


def _is_import_module(func: ast.expr) -> bool:
    """``importlib.import_module`` (or ``import_module`` imported by name, or under an alias
    of importlib such as ``_importlib``)."""
    if isinstance(func, ast.Name):
        return func.id == "import_module"
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _modules(package: Path = PACKAGE) -> Iterator[tuple[str, Path]]:
    for path in sorted(package.rglob("*.py")):
        yield _module_name(path, package), path


def import_graph() -> dict[str, list[tuple[str, int]]]:
    return {
        module: imports_of(
            path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py"
        )
        for module, path in _modules()
    }


def _rank(unit: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if unit in layer:
            return rank
    raise KeyError(unit)


def layer_violations(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Every import that runs up (or into a unit the map does not place), as text."""
    out = []
    for module, imports in sorted(graph.items()):
        for target, line in imports:
            here, there = _unit(module), _unit(target)
            if here == there:
                continue
            try:
                if _rank(here) > _rank(there):
                    out.append(f"{module}:{line} imports {target}, a layer above {here}")
            except KeyError as exc:
                out.append(f"{module}:{line}: cl_diag.{exc.args[0]} has no layer in LAYERS")
    return out


def key_path_literals(source: str) -> list[tuple[int, list[str]]]:
    """Tuples and lists of >= 2 string literals that start with a top-level result key.

    A tuple that is iterated (``for k in (...)``, a comprehension) or searched (``in``) is a
    set of sibling keys, not a path into the result; those are left alone.
    """
    tree = ast.parse(source)
    collections_of_keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            collections_of_keys.add(id(node.iter))
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)):
                    collections_of_keys.add(id(right))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Tuple, ast.List)) or id(node) in collections_of_keys:
            continue
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if (
            len(node.elts) >= 2
            and len(values) == len(node.elts)
            and all(isinstance(v, str) for v in values)
            and values[0] in RESULT_KEYS
        ):
            found.append((node.lineno, values))
    return found


def import_cycles(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Every circle of imports in ``graph`` (module -> [(imported module, line)]), as text: one
    per strongly connected component of two or more modules (or a module importing itself),
    naming a circle through it, ``a:3 -> b:7 -> a`` (module:line of the import)."""
    edges: dict[str, dict[str, int]] = {}
    for module, imports in graph.items():
        edges[module] = {}
        for target, line in imports:
            edges[module].setdefault(target, line)  # the first import of it names the arrow
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges[v]:
                components.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    out = []
    for component in sorted(components):
        members = set(component)
        path, seen = [component[0]], {component[0]}
        while True:  # walk inside the component until a module repeats: that is a circle
            here = path[-1]
            step = next(t for t in sorted(edges[here]) if t in members)
            if step in seen:
                path = [*path[path.index(step) :], step]
                break
            path.append(step)
            seen.add(step)
        hops = [f"{a}:{edges[a][b]}" for a, b in itertools.pairwise(path)]
        out.append(" -> ".join([*hops, path[-1]]))
    return out


#: the modules whose functions must take the typed run config, never a dict (rule (e))
CONFIG_READERS = ("cl_diag.report", "cl_diag.measurement.theory")
#: a name that holds a training config: config, training_config, run_config, facts, options
CONFIG_NAME = re.compile(r"^(?:\w+_)?(?:config|facts|options)$")
#: the annotations that make a config parameter a dict (or say nothing of its type)
UNTYPED = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "Any", "object"})
#: methods that read one option of a config by its name
KEY_READS = frozenset({"get", "pop", "setdefault"})
OPTION_READS = frozenset({"option", "fact"})


def _identifier(node: ast.expr) -> str | None:
    """The last name of ``x``, ``a.b.x`` or ``x[...]``: what the expression is called."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _annotation_names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "dict[str, Any]"
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return set()
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, (ast.Name, ast.Attribute))
    }


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def dict_config_reads(source: str) -> list[tuple[int, str]]:
    """Where ``source`` takes a training config as a dict or reads one of its keys:

    * a function parameter named like a config (:data:`CONFIG_NAME`) without an annotation or
      annotated with a dict type (:data:`UNTYPED`: ``dict``, ``Mapping``, ``Any``, ...);
    * a subscript ``X["key"]`` or a call ``X.get("key")`` (``pop``, ``setdefault``) whose
      ``X`` is named like a config (``result.config["vrn"]``, ``training_config.get("loss")``,
      ``config.options["seed"]``);
    * ``X.option("key")`` or ``X.fact(i, "key")`` with a literal key: the generic option
      accessors are for code that compares runs option by option, under names it is given;
      a reader that wants one option reads its typed field.

    A parameter typed ``RunConfig``, a key held in a variable, iterating over a config and
    dicts of other names (a probe's ``settings``, the loss's resolved ``hp``) are left alone.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if not CONFIG_NAME.match(arg.arg):
                    continue
                names = _annotation_names(arg.annotation)
                if arg.annotation is None or names & UNTYPED:
                    shown = ast.unparse(arg.annotation) if arg.annotation is not None else "—"
                    found.append((arg.lineno, f"parameter {arg.arg}: {shown}"))
        elif isinstance(node, ast.Subscript) and _is_text(node.slice):
            name = _identifier(node.value)
            if name is not None and CONFIG_NAME.match(name):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            literal = any(_is_text(a) for a in node.args)
            name = _identifier(receiver)
            if (
                method in KEY_READS
                and node.args
                and _is_text(node.args[0])
                and name is not None
                and CONFIG_NAME.match(name)
            ) or (method in OPTION_READS and literal):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _literal_keys(node: ast.AST) -> tuple[list[str], list[ast.expr]] | None:
    """(keys, values) of a dict literal or ``dict(k=v, ...)`` call with string keys only."""
    if isinstance(node, ast.Dict) and node.keys:
        keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
        if all(isinstance(k, str) for k in keys):
            return keys, list(node.values)  # type: ignore[return-value]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and node.keywords
        and all(k.arg for k in node.keywords)
    ):
        return [k.arg for k in node.keywords], [k.value for k in node.keywords]  # type: ignore[misc]
    return None


def block_literals(source: str) -> list[tuple[int, str, list[str]]]:
    """(line, block, keys) of every dict literal that is a block of result.json.

    A dict whose string keys all belong to one block of the model, with at least two keys, or
    one key that holds a block itself (``{"histogram": ...}``). A table whose values are all
    string literals or f-strings (probe names to what they need, pair types to words, an
    option's label in a message) is a vocabulary, not a block, and a table keyed by device
    types alone is a per-device setting; both are left alone.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        literal = _literal_keys(node)
        if literal is None:
            continue
        keys, values = literal
        if all(
            isinstance(v, ast.JoinedStr)
            or (isinstance(v, ast.Constant) and isinstance(v.value, str))
            for v in values
        ):
            continue
        if set(keys) <= DEVICE_TYPES:  # a per-device table (tile sizes), not a fingerprint
            continue
        for name, block in sorted(BLOCK_KEYS.items()):
            if set(keys) <= block and (len(keys) >= 2 or keys[0] in BLOCK_VALUED[name]):
                found.append((node.lineno, name, keys))
                break
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that document (a bare string statement: a docstring)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def pair_type_strings(source: str) -> list[tuple[int, str]]:
    """(line, string) of every string literal that spells a pair type: "positive" as the whole
    string, the other names (``cross_view_negative``, ``cross_neg``, ...) anywhere in it as a
    word of their own (``"cross_neg_mean"``, f-string parts). Docstrings are prose, left out."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in prose:
            continue
        if node.value == "positive" or _EMBEDDED_PAIR_TYPE.search(node.value):
            found.append((node.lineno, node.value))
    return found


# ---- the rules, on the code as it is ------------------------------------------------------


def test_every_unit_of_the_package_has_a_layer():
    units = {_unit(module) for module, _ in _modules()}
    placed = {unit for layer in LAYERS for unit in layer}
    assert units - placed == set(), "add the new unit to LAYERS (and to docs/architecture.md)"
    assert len(placed) == sum(len(layer) for layer in LAYERS), "a unit sits in two layers"


def test_nothing_outside_the_command_line_imports_it():
    graph = import_graph()
    assert graph, "no modules found"
    offenders = [
        f"{module}:{line} imports {target}"
        for module, imports in graph.items()
        for target, line in imports
        if _unit(target) == "cli" and _unit(module) not in CLI
    ]
    assert offenders == []


def test_imports_run_down_the_layers_only():
    assert layer_violations(import_graph()) == []


def test_models_sit_below_training():
    # the arrow issue 10 named: rebuilding a model never reaches up into datasets or augmentation
    graph = import_graph()
    up = [
        (module, target)
        for module, imports in graph.items()
        if _unit(module) == "models"
        for target, _ in imports
        if _unit(target) in ("training", "orchestration", "report", "cli")
    ]
    assert up == []
    assert _rank("models") > _rank("training")


def test_no_result_key_path_is_spelled_outside_the_result_model():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {values}"
        for _, path in _modules()
        if PACKAGE / "result" not in path.parents
        for line, values in key_path_literals(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


# ---- the checkers themselves, on code written to trip them ---------------------------------


def test_imports_are_read_at_every_depth_and_resolved():
    source = (
        "import os\n"
        "import cl_diag\n"
        "from cl_diag.models import build_model\n"
        "from . import foreign\n"
        "from ..training.data import digits_split\n"
        "from cl_diag import result, __version__\n"
        "def late():\n"
        "    import cl_diag.cli.train\n"
        "    from cl_diag import measure\n"
        "    return cl_diag.__version__\n"
    )
    found = imports_of(source, "cl_diag.models.subject")
    assert found == [
        ("cl_diag", 2),
        ("cl_diag.models", 3),
        ("cl_diag.models.foreign", 4),
        ("cl_diag.training.data", 5),
        ("cl_diag.result", 6),
        ("cl_diag", 6),
        ("cl_diag.cli.train", 8),
        ("cl_diag", 9),
    ]
    # issue 36: a bare ``import cl_diag`` for the version is an import of the package root
    assert imports_of("import cl_diag\ncl_diag.__version__\n", "cl_diag.io.x") == [("cl_diag", 1)]
    assert imports_of("from cl_diag.version import __version__\n", "cl_diag.io.x") == [
        ("cl_diag.version", 1)
    ]
    # in a package's __init__, "." is the package itself
    assert imports_of("from .build import x\n", "cl_diag.models", is_package=True) == [
        ("cl_diag.models.build", 1)
    ]


def test_an_upward_import_through_importlib_or_the_root_is_reported():
    # issue 36: importlib.import_module with a literal name is an import like any other, and
    # the package root sits at the top: a bottom module reaching it for the version runs up
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "def late():\n"
        "    importlib.import_module('cl_diag.report.figures')\n"
        "    import_module('cl_diag.orchestration')\n"
        "    importlib.import_module(name)\n"
        "    import cl_diag\n"
        "    return cl_diag.__version__\n"
    )
    graph = {"cl_diag.environment": imports_of(source, "cl_diag.environment")}
    assert sorted(layer_violations(graph)) == [
        "cl_diag.environment:4 imports cl_diag.report.figures, a layer above environment",
        "cl_diag.environment:5 imports cl_diag.orchestration, a layer above environment",
        "cl_diag.environment:7 imports cl_diag, a layer above environment",
    ]


def test_an_upward_import_is_reported():
    graph = {
        "cl_diag.models.subject": [("cl_diag.training.data", 7), ("cl_diag.io.atomic", 8)],
        "cl_diag.training.loop": [("cl_diag.models", 3)],
        "cl_diag.losses.x": [("cl_diag.measurement.theory", 2)],  # same layer
        "cl_diag.result": [("cl_diag.plugins.y", 4)],
    }
    assert layer_violations(graph) == [
        "cl_diag.models.subject:7 imports cl_diag.training.data, a layer above models",
        "cl_diag.result:4: cl_diag.plugins has no layer in LAYERS",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('x = ("layers", "projector", "pairs")\n', [(1, ["layers", "projector", "pairs"])]),
        ('get(d, ["theory", "statement"])\n', [(1, ["theory", "statement"])]),
        ('for k in ("n_ref", "threshold", "mode"):\n    pass\n', []),
        ('y = [k for k in ("config", "backbone") if k]\n', []),
        ('ok = key in ("probes", "theory")\n', []),
        ('x = ("epoch", "step")\n', []),  # not a result key
        ('x = ("layers",)\n', []),  # one key is a key, not a path
        ('x = ("layers", name)\n', []),  # not all literals
    ],
)
def test_key_path_detector(source, expected):
    assert key_path_literals(source) == expected


# ---- rules (d) and (e): no circles, no dict configs -------------------------------------------


def _config_reader_paths() -> list[Path]:
    return [
        path
        for module, path in _modules()
        if any(module == m or module.startswith(m + ".") for m in CONFIG_READERS)
    ]


def test_no_circle_of_imports():
    assert import_cycles(import_graph()) == []


def test_no_report_finding_or_theory_function_reads_a_dict_config():
    paths = _config_reader_paths()
    assert PACKAGE / "measurement" / "theory.py" in paths
    assert PACKAGE / "report" / "claims" / "evaluate.py" in paths
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {what}"
        for path in paths
        for line, what in dict_config_reads(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_a_planted_circle_is_reported_through_late_imports_too():
    # three modules in a circle, the last arrow a late import (inside a function), and one
    # module that only imports into the circle
    sources = {
        "cl_diag.report.a": "import cl_diag.report.b\n",
        "cl_diag.report.b": "import os\n\nfrom cl_diag.report.c import x\n",
        "cl_diag.report.c": "def late():\n    from cl_diag.report.a import y\n",
        "cl_diag.report.d": "from cl_diag.report.a import z\n",
    }
    graph = {m: imports_of(src, m) for m, src in sources.items()}
    assert import_cycles(graph) == [
        "cl_diag.report.a:1 -> cl_diag.report.b:3 -> cl_diag.report.c:2 -> cl_diag.report.a"
    ]
    # break the circle: nothing is reported
    graph["cl_diag.report.c"] = []
    assert import_cycles(graph) == []
    # a module importing itself is a circle of one
    assert import_cycles({"cl_diag.x": [("cl_diag.x", 4)]}) == ["cl_diag.x:4 -> cl_diag.x"]
    # two circles are two reports
    two = {
        "cl_diag.a": [("cl_diag.b", 1)],
        "cl_diag.b": [("cl_diag.a", 2)],
        "cl_diag.c": [("cl_diag.d", 3)],
        "cl_diag.d": [("cl_diag.c", 4)],
    }
    assert import_cycles(two) == [
        "cl_diag.a:1 -> cl_diag.b:2 -> cl_diag.a",
        "cl_diag.c:3 -> cl_diag.d:4 -> cl_diag.c",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # a config taken as a dict, or with no type at all
        ("def f(config: dict):\n    pass\n", [(1, "parameter config: dict")]),
        (
            "def f(x, *, training_config: Mapping[str, Any]) -> dict:\n    pass\n",
            [(1, "parameter training_config: Mapping[str, Any]")],
        ),
        ("def f(facts):\n    pass\n", [(1, "parameter facts: —")]),
        (
            'def f(run_config: "dict[str, object]"):\n    pass\n',
            [(1, "parameter run_config: 'dict[str, object]'")],
        ),
        # one key read from a config dict
        ('w = result.config["vrn"]\n', [(1, "result.config['vrn']")]),
        ('m = training_config.get("batch_size")\n', [(1, "training_config.get('batch_size')")]),
        ('s = config.options["seed"]\n', [(1, "config.options['seed']")]),
        ('a = run.facts.get("alpha", 0.0)\n', [(1, "run.facts.get('alpha', 0.0)")]),
        ('v = cfg.option("vrn")\n', [(1, "cfg.option('vrn')")]),
        ('b = cmp.fact(i, "batch_size")\n', [(1, "cmp.fact(i, 'batch_size')")]),
        # the typed config, a key in a variable, other dicts: no read of a config key
        ("def f(config: RunConfig, configs: Sequence[RunConfig]):\n    pass\n", []),
        ("def f(settings: dict, hp: Mapping[str, Any]):\n    pass\n", []),
        ("v = config.option(key)\nw = cmp.fact(i, key)\n", []),
        ("rows = [[k, v] for k, v in flatten(result.config).items()]\n", []),
        ('t = hp["temperature"]\nk = probes.settings.get("k")\nm = config.batch_size\n', []),
        ('x = views.get("num_images")\ny = layer["d"]\n', []),
    ],
)
def test_dict_config_detector(source, expected):
    assert dict_config_reads(source) == expected


# ---- rules (f), (g) and (h): no hand-built blocks, pair types and module names spelled once --


def block_offenders(package: Path = PACKAGE) -> list[str]:
    """Rule (f) over a package: the block literals of its measurement, orchestration, report."""
    return [
        f"{path.relative_to(package.parent)}:{line} a {block} block {keys}"
        for module, path in _modules(package)
        if _unit(module) in BUILDERS
        for line, block, keys in block_literals(path.read_text(encoding="utf-8"))
    ]


def pair_type_offenders(package: Path = PACKAGE) -> list[str]:
    """Rule (g) over a package: the pair types spelled outside its vocabulary.py."""
    return [
        f"{path.relative_to(package.parent)}:{line} {value!r}"
        for _, path in _modules(package)
        if path != package / "vocabulary.py"
        for line, value in pair_type_strings(path.read_text(encoding="utf-8"))
    ]


def test_no_result_block_is_a_dict_literal_where_blocks_are_built():
    assert block_offenders() == []


def test_pair_types_are_spelled_in_the_vocabulary_only():
    assert pair_type_offenders() == []
    # the vocabulary itself does spell them (the rule reads the strings it should)
    spelled = {v for _, v in pair_type_strings((PACKAGE / "vocabulary.py").read_text("utf-8"))}
    assert spelled >= PAIR_TYPE_NAMES


def shared_name_offenders(package: Path = PACKAGE) -> list[str]:
    """Modules that share a basename without naming each other in their docstrings."""
    by_name: dict[str, list[Path]] = {}
    for _, path in _modules(package):
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(path)
    silent = []
    for paths in by_name.values():
        for path in paths:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            silent += [
                f"{_module_name(path, package)} does not name {_module_name(other, package)}"
                for other in paths
                if other != path and _module_name(other, package) not in doc
            ]
    return silent


def test_a_shared_module_name_is_one_concept_at_two_layers():
    """Two modules share a basename only when they are one concept at two layers (cli/train
    and orchestration/train, io/checkpoints and models/checkpoints, ...), and then each one's
    docstring names the other."""
    names = [path.name for _, path in _modules() if path.name != "__init__.py"]
    assert len(names) - len(set(names)) >= 7, "the check would pass vacuously"
    assert shared_name_offenders() == []


def test_one_result_saves_its_reports_through_the_package_root():
    """One Result: its save() writes the analysis folder with the reports, which sit above the
    model, so the package root (which imports orchestration, late) hands the writer down
    through cl_diag.upcalls, which imports nothing of cl_diag (so the root need not import
    the result model: tests/test_cli_startup.py); the model imports nothing above its own
    layer."""
    graph = import_graph()
    assert {_unit(target) for target, _ in graph["cl_diag.result"]} <= set(LAYERS[-1])
    assert "cl_diag.upcalls" in {target for target, _ in graph["cl_diag.result"]}
    assert graph["cl_diag.upcalls"] == []
    assert "cl_diag.orchestration.analyze" in {target for target, _ in graph["cl_diag"]}
    source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    assert "_upcalls.install(_write_analysis, _result_text, _result_html)" in source


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # the blocks measurement used to build by hand
        ('s = {"count": 3, "mean": m, "var": v}\n', [(1, "PairStats", ["count", "mean", "var"])]),
        ('g = {"value": c, "below_one": c < 1}\n', [(1, "Ceiling", ["value", "below_one"])]),
        ('x = {"u": a, "v": b}\n', [(1, "EffectiveRank", ["u", "v"])]),
        ("x = dict(images=n, of=total)\n", [(1, "SplitSize", ["images", "of"])]),
        ('x = {"histogram": h.to_dict()}\n', [(1, "PairStats", ["histogram"])]),
        ('x = {"kind": "embeddings", "path": str(p)}\n', [(1, "Source", ["kind", "path"])]),
        ('e = {"cpu": c, "threads": t}\n', [(1, "Environment", ["cpu", "threads"])]),
        # not blocks: other keys, one plain key, a vocabulary, keys that are not literals
        ('x = {"count": 3, "label": "a"}\n', []),
        ('x = {"alpha": markers}\n', []),
        ('x = {"linear": "train_y", "knn": "train_y"}\n', []),
        ('x = {"image_size": f"the image side {side}"}\n', []),  # a label, not a block
        ('x = {"image_size": side}\n', [(1, "Source", ["image_size"])]),
        ('_TILE = {"cpu": 1024, "cuda": 8192}\n', []),  # a per-device table
        ('x = {name: 1, "mean": 2}\n', []),
        ('x = {**base, "mean": 2, "var": 3}\n', []),
        ("x = dict(base, mean=2, var=3)\n", []),
    ],
)
def test_block_literal_detector(source, expected):
    assert block_literals(source) == expected


def _planted(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the package with ``files`` (relative path -> source) planted in it."""
    package = tmp_path / "cl_diag"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in files.items():
        (package / name).write_text(source, encoding="utf-8")
    return package


def test_a_planted_block_literal_is_reported(tmp_path):
    """Rule (f) on the package with a module written to break it (and one beside the rule)."""
    block = 'def stats(x):\n    return {"alignment": 1.0, "frontier_gap": 0.0}\n'
    package = _planted(tmp_path, {"measurement/zz_planted.py": block, "io/zz_planted.py": block})
    planted = set(block_offenders(package)) - set(block_offenders())
    assert planted == {
        "cl_diag/measurement/zz_planted.py:2 a Geometry block ['alignment', 'frontier_gap']"
    }


@pytest.mark.slow
def test_a_planted_pair_type_is_reported(tmp_path):
    """Rule (g) on the package with the old spellings planted in two modules."""
    package = _planted(
        tmp_path,
        {
            "report/zz_planted.py": 'KINDS = ("positive", "cross_view_negative")\n',
            "measurement/zz_planted.py": 'def col(k):\n    return f"{k}_x" + "cross_neg_var"\n',
        },
    )
    planted = set(pair_type_offenders(package)) - set(pair_type_offenders())
    assert planted == {
        "cl_diag/measurement/zz_planted.py:2 'cross_neg_var'",
        "cl_diag/report/zz_planted.py:1 'positive'",
        "cl_diag/report/zz_planted.py:1 'cross_view_negative'",
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('kind = "positive"\n', [(1, "positive")]),
        ('x = stats["cross_view_negative"]\n', [(1, "cross_view_negative")]),
        (
            'cols = ("cross_neg_mean", "within_neg_var")\n',
            [(1, "cross_neg_mean"), (1, "within_neg_var")],
        ),
        ('key = f"{layer}/within_view_negative_var"\n', [(1, "/within_view_negative_var")]),
        ('d = {"within_neg": 1}\n', [(1, "within_neg")]),
        # prose and other words are not pair types
        ('"""Counts cross_view_negative pairs."""\n', []),
        ('def f():\n    """The ``cross_neg`` column."""\n', []),
        ('x = "positive_mean"\n', []),
        ('x = "must be positive"\n', []),
        ('x = "cross-view negative"\n', []),
        ('x = "pos"\n', []),
        ('x = "cross_negatives"\n', []),
    ],
)
def test_pair_type_detector(source, expected):
    assert pair_type_strings(source) == expected


def test_a_planted_shared_module_name_is_reported(tmp_path):
    """Another concept under a name already taken (the old probes/inputs.py) is reported."""
    package = _planted(tmp_path, {"measurement/probes/inputs.py": '"""Probe inputs."""\n'})
    assert shared_name_offenders(package) == [
        "cl_diag.measurement.inputs does not name cl_diag.measurement.probes.inputs",
        "cl_diag.measurement.probes.inputs does not name cl_diag.measurement.inputs",
    ]


# --------------------------------------------------------------------------- (i) one declaration

#: the calls that declare an option by name (cl_diag.options: the Option class and its two
#: shorthands); ``option(...)`` declares one as a config dataclass's field
_OPTION_CALLS = ("Option", "_opt", "_maybe")
#: the option tables of commands that are not (yet) made from a config's fields: the names they
#: declare by hand may coincide with a declared config's (``--seed`` of synth is not train's)
HAND_TABLES = (
    "_SEED",
    "SYNTH",
    "SWEEP",
    "REPRODUCE",
    "MONITOR",
)


def declared_configs(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each config class whose fields are declared with ``option(...)`` -> its field names."""
    configs: dict[str, set[str]] = {}
    for _, path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {
                    item.target.id
                    for item in node.body
                    if isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and isinstance(item.value, ast.Call)
                    and _identifier(item.value.func) == "option"
                }
                if names:
                    configs[node.name] = names
    return configs


#: the API functions that take a command's declared options as keywords (``**options``,
#: checked against the declarations) -> that command's config and the parameters the function
#: writes out itself because they are its own (arrays where the command reads a file)
API_KEYWORDS = {
    "measure": ("AnalyzeConfig", {"z1", "z2", "labels", "n_ref", "keys", "cross_modal", "probes"}),
    "theory": ("TheoryConfig", {"source"}),
}


def second_declarations(package: Path = PACKAGE) -> list[str]:
    """Where an option that a config field declares is declared again (rule (i)): a Typer
    parameter of the command made from that config (``@declared_options(Config, ...)``), an
    ``Option``/``_opt``/``_maybe`` of its name outside the hand-written tables of other
    commands (:data:`HAND_TABLES`), a Protocol restating the config's fields (what the
    training loop's ``LoopConfig`` once did), or a keyword parameter of an API function
    (:data:`API_KEYWORDS`) that writes out one of its command's options."""
    configs = declared_configs(package)
    declared = set().union(*configs.values()) if configs else set()
    found = []
    for _, path in _modules(package):
        where = path.relative_to(package.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hand = {
            id(call)
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                _identifier(t) in HAND_TABLES
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            for call in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                made_from = {
                    _identifier(d.args[0])
                    for d in node.decorator_list
                    if isinstance(d, ast.Call)
                    and _identifier(d.func) == "declared_options"
                    and d.args
                }
                fields = set().union(*(configs.get(c or "", set()) for c in made_from))
                args = node.args.args + node.args.kwonlyargs
                if where == "cl_diag/api.py" and node.name in API_KEYWORDS:
                    config, own = API_KEYWORDS[node.name]
                    found += [
                        f"{where}:{a.lineno} {node.name}({a.arg}=...) again as a keyword"
                        for a in args
                        if a.arg in configs.get(config, set()) - own
                    ]
                found += [
                    f"{where}:{a.lineno} --{a.arg.replace('_', '-')} again as a Typer parameter"
                    for a in args
                    if a.arg in fields
                ]
            elif (
                isinstance(node, ast.Call)
                and _identifier(node.func) in _OPTION_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in declared
                and id(node) not in hand
            ):
                found.append(f"{where}:{node.lineno} {node.args[0].value!r} again as an Option")
            elif isinstance(node, ast.ClassDef) and any(
                _identifier(b) == "Protocol" for b in node.bases
            ):
                restated = {
                    item.name if isinstance(item, ast.FunctionDef) else _identifier(item.target)
                    for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AnnAssign))
                }
                for config, names in configs.items():
                    if len(restated & names) >= 3:
                        found.append(f"{where}:{node.lineno} {node.name} restates {config}")
    return found


@pytest.mark.slow
def test_each_option_is_declared_once():
    """Rule (i): train's, analyze's and theory's options are the fields of TrainConfig,
    AnalyzeConfig and TheoryConfig (declared with option()), and nothing declares one of them
    again."""
    configs = declared_configs()
    assert len(configs.get("TrainConfig", ())) >= 50, "the check would pass vacuously"
    assert len(configs.get("AnalyzeConfig", ())) >= 30, "the check would pass vacuously"
    assert len(configs.get("TheoryConfig", ())) >= 13, "the check would pass vacuously"
    assert second_declarations() == []


@pytest.mark.slow
def test_a_planted_second_declaration_of_an_option_is_reported(tmp_path):
    """A Typer parameter for --batch-size in the train command, a hand-written table that
    declares batch_size again, a Protocol restating the config, and keywords of the API's
    theory and measure written out again are each reported."""
    api = (PACKAGE / "api.py").read_text(encoding="utf-8")
    for own in ("**settings: object", "**pair_options: object"):
        assert api.count(own) == 1
    planted_api = api.replace(
        "**settings: object", "temperature: float | None = None, **settings: object"
    ).replace("**pair_options: object", "seed: int = 0,\n    **pair_options: object")
    command = (PACKAGE / "cli" / "train.py").read_text(encoding="utf-8")
    assert "    **declared: Any," in command
    planted_command = command.replace(
        "    **declared: Any,",
        '    batch_size: int = typer.Option(128, help="Global batch."),\n    **declared: Any,',
    )
    package = _planted(
        tmp_path,
        {
            "cli/train.py": planted_command,
            "api.py": planted_api,
            "orchestration/zz_planted.py": (
                "from cl_diag.options import Option, OptionTable\n"
                'AGAIN = OptionTable("again", (Option("batch_size", int, low=2),))\n'
            ),
            "training/zz_planted.py": (
                "from typing import Protocol\n"
                "class Config(Protocol):\n"
                "    loss: str\n    batch_size: int\n    seed: int\n"
            ),
        },
    )
    assert sorted(second_declarations(package)) == sorted(
        [
            next(
                f"cl_diag/cli/train.py:{i} --batch-size again as a Typer parameter"
                for i, line in enumerate(planted_command.splitlines(), 1)
                if line.startswith("    batch_size: int")
            ),
            "cl_diag/orchestration/zz_planted.py:2 'batch_size' again as an Option",
            "cl_diag/training/zz_planted.py:2 Config restates TrainConfig",
            *(
                f"cl_diag/api.py:{i} {function}({name}=...) again as a keyword"
                for function, name, start in (
                    ("theory", "temperature", "def theory("),
                    ("measure", "seed", "    seed: int = 0,"),
                )
                for i, line in enumerate(planted_api.splitlines(), 1)
                if line.startswith(start)
            ),
        ]
    )


def test_the_train_command_is_made_from_the_declarations():
    """Every field of TrainConfig is an option of ``cl-diag train`` with the field's default,
    help and panel, and the config and the command agree on what a value must be."""
    import typer.core
    import typer.main

    from cl_diag.cli import app
    from cl_diag.trainconfig import TRAIN, TrainConfig

    command = typer.main.get_command(app).commands["train"]  # type: ignore[attr-defined]
    params = {p.name: p for p in command.params if isinstance(p, typer.core.TyperOption)}
    defaults = TrainConfig.defaults()
    for option in TRAIN.options:
        param = params[option.name]
        assert param.default == defaults[option.name], option.name
        assert param.help == option.help and option.help, option.name
        assert param.rich_help_panel == option.panel, option.name  # type: ignore[attr-defined]
    assert params["quiet"].opts == ["--quiet", "-q"]
    assert params["within_view"].secondary_opts == ["--no-within-view"]
    assert set(params) == set(TRAIN.names) | {"recipe_name"}
