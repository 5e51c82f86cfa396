"""The shape of the code: imports run one way, and result.json's key paths have one home.

Every module of ``cl_diag`` is parsed, not imported, and each of its imports is read, at
module level and inside functions (a late import is still an arrow). Three rules:

(a) no module outside the command line (``cl_diag/cli``, and ``python -m cl_diag``) imports
    ``cl_diag.cli``;
(b) each module imports only from its own layer or a layer below (:data:`LAYERS`, the one
    map of the layers; docs/architecture.md explains it);
(c) no module but ``cl_diag/result.py`` spells a key path of result.json as a tuple or list
    of string literals: the typed result model reads and writes those keys.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from cl_diag.result import Result

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
    ("io", "errors", "result", "vocabulary", "environment"),
)

#: The command line: the only units that may import cl_diag.cli.
CLI = ("cli", "__main__")

#: Names any module may import from the package root: the version string is no API.
ROOT_CONSTANTS = frozenset({"__version__"})

#: result.json's top-level keys (the typed model's fields; ``extra`` keeps unknown keys).
RESULT_KEYS = frozenset(f.name for f in dataclasses.fields(Result)) - {"extra"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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
    imports the module ``P.x`` when there is one, else ``P``; the package root's version
    string, and a bare ``import cl_diag`` used only for it, are no import of the API.
    """
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "cl_diag":
                    used = {
                        n.attr
                        for n in ast.walk(tree)
                        if isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Name)
                        and n.value.id == (alias.asname or "cl_diag")
                    }
                    if not used <= ROOT_CONSTANTS:
                        found.append(("cl_diag", node.lineno))
                elif alias.name.startswith("cl_diag."):
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
                if target == "cl_diag" and alias.name in ROOT_CONSTANTS:
                    continue
                sub = f"{target}.{alias.name}"
                name = sub if _is_module(sub) else target
                if name not in targets:
                    targets.append(name)
            found += [(name, node.lineno) for name in targets]
    return found


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield _module_name(path), path


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
        if path != PACKAGE / "result.py"
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
        ("cl_diag.models", 3),
        ("cl_diag.models.foreign", 4),
        ("cl_diag.training.data", 5),
        ("cl_diag.result", 6),
        ("cl_diag.cli.train", 8),
        ("cl_diag", 9),
    ]
    # a bare ``import cl_diag`` that reaches past the version is an import of the API
    assert imports_of("import cl_diag\ncl_diag.measure()\n", "cl_diag.io.x") == [("cl_diag", 1)]
    # in a package's __init__, "." is the package itself
    assert imports_of("from .build import x\n", "cl_diag.models", is_package=True) == [
        ("cl_diag.models.build", 1)
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
