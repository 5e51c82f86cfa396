"""An instant command line (issue 25 item 1): help and every argument error that needs no data
come without torch, pandas, scipy or matplotlib, which load only inside the commands that
compute. Checked on ``sys.modules`` of a fresh interpreter, not with a timing (the timing is
benchmarks/bench_cli.py's, paired against ``python -c pass``).

Lighter modules that help does not need are held to the same rule (:data:`NOT_FOR_HELP`): the
result model (about 0.1 s of class creation; the package root hands it the analysis writer
through :mod:`cl_diag.upcalls` instead of importing it), pydantic (which typer 0.2x imports
to coerce an option's value, and did for the group's own absent ``--help`` on every command
line: :class:`cl_diag.cli._Commands`), and what only a command's run needs (the progress bars,
the recipes, the sweep)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "pandas", "scipy", "matplotlib", "sklearn", "torchvision")
#: what neither ``import cl_diag.cli`` nor any ``--help`` imports
NOT_FOR_HELP = (
    "cl_diag.result",
    "pydantic",
    "rich.progress",
    "cl_diag.cli.progress",
    "cl_diag.recipes",
    "cl_diag.orchestration.sweep",
    "cl_diag.io.output",
)

_CHILD = """
import contextlib, io, json, sys
import cl_diag
root = sorted(m for m in HEAVY + NOT_FOR_HELP + ("typer", "rich") if m in sys.modules)
import cl_diag.cli
from cl_diag.cli import main
import typer.main

loaded = {"root": root, "import": sorted(m for m in HEAVY + NOT_FOR_HELP if m in sys.modules)}
typer.main.get_command(cl_diag.cli.app)  # the app built, as the console script builds it
codes = {}
for args in COMMANDS:
    if args[-1] != "--help" and "help" not in loaded:  # the helps come first
        loaded["help"] = sorted(m for m in HEAVY + NOT_FOR_HELP if m in sys.modules)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            codes[" ".join(args)] = [exc.code, err.getvalue()]
loaded["after"] = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"loaded": loaded, "codes": codes}))
"""

#: help of the app and of every command, and argument errors that need no data
COMMANDS = [
    ["--help"],
    *(
        [name, "--help"]
        for name in ("analyze", "train", "compare", "sweep", "synth", "reproduce", "recipes")
    ),
    ["train", "--batch-size", "0"],
    ["train", "--views", "100000"],
    ["train", "--queue", "1000000000"],
    ["train", "--loss", "nce"],
    ["train", "--bogus"],
    ["analyze", "x.npz", "--num-pairs", "0"],
    ["analyze", "x.npz", "--batch-size", "4"],
    ["analyze", "x.npz", "--layers", "nothing"],
    ["compare", "--out", "c"],
    ["synth", "x.npz", "--n", "many"],
]


def _run() -> dict:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            f"HEAVY = {HEAVY!r}\nNOT_FOR_HELP = {NOT_FOR_HELP!r}\nCOMMANDS = {COMMANDS!r}\n"
            + _CHILD,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def startup() -> dict:
    return _run()


def test_importing_the_package_imports_neither_the_result_model_nor_the_cli_libraries(startup):
    """``import cl_diag`` (the Python API's root, also what every command line imports first)
    imports none of the heavy modules, not the result model, not typer or rich."""
    assert startup["loaded"]["root"] == []


def test_importing_the_cli_imports_no_heavy_module(startup):
    assert startup["loaded"]["import"] == []


def test_help_imports_nothing_it_does_not_print(startup):
    """Every ``--help`` (the app's and each command's) leaves out the result model, pydantic,
    the progress bars, the recipes and the sweep, as well as the heavy modules."""
    assert COMMANDS[0] == ["--help"] and COMMANDS[8][-1] != "--help"
    assert startup["loaded"]["help"] == []


def test_help_and_argument_errors_import_no_heavy_module(startup):
    assert startup["loaded"]["after"] == []
    codes = startup["codes"]
    for args in COMMANDS:
        key = " ".join(args)
        code, err = codes[key]
        if args[-1] == "--help":
            assert code == 0, (key, err)
        else:  # every one a user's mistake: exit 2 and a message, no traceback
            assert code == 2, (key, err)
            assert "Traceback" not in err and err.strip(), (key, err)
    assert "--encode-batch-size" in codes["analyze x.npz --batch-size 4"][1]
    assert "--views 100000 must be in [2, 64]" in " ".join(codes["train --views 100000"][1].split())
