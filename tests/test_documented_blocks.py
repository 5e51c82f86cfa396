"""Every documented block runs (issue 37 item 7): each ``bash`` and ``python`` block of README.md
and docs/*.md is extracted and checked here, so a doc that drifts from the code fails CI.

* Every ``cl-diag`` command line (and ``torchrun ... -m cl_diag ...``) in a bash block is parsed
  by the CLI's own parser, as ``cl-diag`` would parse it (key=value overrides included): the
  command and every option exist and every value has its declared type (a choice among words
  is checked when the command runs). The commands that read files
  the docs assume (a CIFAR folder, a trained run) are not run; those that the suite can afford
  are run end to end in :data:`RUN`.
* Every python block runs, in document order with one namespace per document (docs/losses.md's
  blocks build on its first), after a *prelude* that fills the placeholders the prose names
  (``my_backbone``, ``train_set``, ``img``, ...). Data a test machine cannot have (CIFAR under
  ``~/data``) is replaced through :data:`SUBSTITUTIONS`, each entry naming what it replaces.

A new block needs nothing here unless it uses a new placeholder: then the test fails naming it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)

#: commands a bash block shows that the suite runs end to end (in a temporary folder, after
#: the 20-second start's `cl-diag synth pairs.npz --n 2000 --d 64`)
RUN = (
    "cl-diag analyze pairs.npz --n-ref 50000",
    "cl-diag analyze pairs.npz --pairs sampled --num-pairs 5000 --seed 0",
    "cl-diag recipes",
)

#: the placeholders of each python block, by a line the block starts with: code run before it
PRELUDES = {
    'res = cl_diag.measure(dict(np.load("clip.npz"))': """
rng = np.random.default_rng(0)
img = rng.standard_normal((200, 16)).astype(np.float32)
txt = (img + 0.5 * rng.standard_normal((200, 16))).astype(np.float32)
np.savez("clip.npz", image_embeds=img, text_embeds=txt)
""",
    "from cl_diag.result import load": """
cl_diag.measure(*np.random.default_rng(1).standard_normal((2, 100, 8))).save("out/")
""",
    "import cl_diag\n\nres = cl_diag.analyze(encoder=my_backbone": """
from torch import nn
my_backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
my_head = nn.Linear(8, 4)
""",
    "from cl_diag.losses import LOSSES\n\nLOSSES[": """
g = torch.Generator().manual_seed(0)
z1, z2 = torch.randn(40, 8, generator=g), torch.randn(40, 8, generator=g)
y = torch.randint(0, 4, (40,), generator=g)
""",
    "mon = cl_diag.Monitor(n_ref=len(train_set)": """
train_set = range(256)
model = torch.nn.Linear(8, 4)
loader = [(torch.randn(16, 8), torch.randn(16, 8)) for _ in range(3)]
def my_loss(z1, z2):
    return (z1 - z2).pow(2).mean()
""",
    "from cl_diag.io.loggers import CsvLogger": """
pytest.importorskip("tensorboard")
train_set = range(256)
""",
    "from cl_diag.integrations.lightning import MonitorCallback": """
lightning = pytest.importorskip("lightning")
train_set = range(256)
""",
    "from cl_diag.losses import SigmoidLoss": """
device = "cpu"
model = torch.nn.Linear(8, 8)  # z1, z2: the first block's
""",
    'LOSSES["simclr"](z1, z2, extra_views': """
z3, z4 = torch.randn_like(z1), torch.randn_like(z1)
k1, k2 = torch.randn(64, z1.shape[1]), torch.randn(64, z1.shape[1])
d = -1 / 49_999
""",
    "from cl_diag.losses import build_loss, global_loss": """
z1_local, z2_local = torch.randn(16, 8, requires_grad=True), torch.randn(16, 8)
labels_local = None
""",
}

#: what a block names that a test machine cannot have, and what the test gives instead
SUBSTITUTIONS = {
    # CIFAR-10 under ~/data: the bundled digits (the encoder is a 3-channel module: the API
    # repeats the grey channel, as the CLI does)
    'dataset="cifar10",\n                      data_root="~/data", ': 'dataset="digits", ',
}


def _blocks(kind: str) -> list[tuple[Path, int, str]]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if match[1] == kind:
                found.append((path, text[: match.start()].count("\n") + 1, match[2]))
    return found


def _command_lines(block: str) -> list[list[str]]:
    """The cl-diag argument lists of a bash block: comments and ``[optional]`` parts dropped,
    ``torchrun ... -m cl_diag`` read as ``cl-diag``, the lines that run something else left out."""
    commands = []
    for raw in block.replace("\\\n", " ").splitlines():
        if raw.lstrip().startswith("#"):
            continue
        line = re.sub(r"\[[^\]]*\]", "", raw.split("  #")[0].split(" # ")[0]).strip()
        for part in line.split("&&"):
            words = shlex.split(part)
            if words[:1] == ["cl-diag"]:
                commands.append(words[1:])
            elif words[:1] == ["torchrun"] and "cl_diag" in words:
                commands.append(words[words.index("cl_diag") + 1 :])
    return commands


BASH_COMMANDS = [
    pytest.param(args, id=f"{path.name}:{line}:{' '.join(args)[:60]}")
    for path, line, block in _blocks("bash")
    for args in _command_lines(block)
]


def test_the_docs_show_commands_of_every_kind():
    shown = {args[0] for args in (p.values[0] for p in BASH_COMMANDS) if args}
    assert {"analyze", "train", "compare", "sweep", "reproduce", "synth", "recipes"} <= shown


@pytest.mark.parametrize("args", BASH_COMMANDS)
def test_every_documented_command_line_parses(args):
    """The command line as cl-diag's parser reads it: an option renamed or a value of the wrong
    type in a doc fails here, with the doc's line in the test id."""
    from cl_diag.cli import _overrides_as_options, _refuse_unreadable_values, app

    if args == ["--help"]:
        return
    argv = _overrides_as_options(list(args))
    _refuse_unreadable_values(argv)
    group = typer.main.get_command(app)
    command = getattr(group, "commands", {}).get(argv[0])
    assert command is not None, f"cl-diag has no command {argv[0]!r}"
    # parse as the command would (option names, types, choices, arity); nothing is run
    command.make_context(argv[0], argv[1:]).close()


def test_the_commands_the_suite_can_afford_run(run_cli, tmp_path, monkeypatch):
    shown = [" ".join(p.values[0]) for p in BASH_COMMANDS]
    monkeypatch.chdir(tmp_path)
    assert run_cli("synth", "pairs.npz", "--n", "2000", "--d", "64").code == 0
    for command in RUN:
        assert command.removeprefix("cl-diag ") in shown, command  # still documented
        result = run_cli(*shlex.split(command)[1:])
        assert result.code == 0, (command, result.err)


def _python_documents() -> dict[Path, list[tuple[int, str]]]:
    documents: dict[Path, list[tuple[int, str]]] = {}
    for path, line, block in _blocks("python"):
        documents.setdefault(path, []).append((line, block))
    return documents


@pytest.mark.parametrize(
    "path", sorted(_python_documents()), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_python_block_runs(path, tmp_path, monkeypatch):
    import torch

    import cl_diag

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["block", str(tmp_path / "example-out")])
    namespace = {"np": np, "torch": torch, "cl_diag": cl_diag, "pytest": pytest}
    used = set()
    for line, block in _python_documents()[path]:
        code = block
        for original, replacement in SUBSTITUTIONS.items():
            if original in code:
                code, used = code.replace(original, replacement), used | {original}
        for start, prelude in PRELUDES.items():
            if code.startswith(start):
                exec(compile(prelude, f"prelude of {path.name}:{line}", "exec"), namespace)
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), namespace)
        except NameError as exc:
            raise AssertionError(
                f"{path.name}:{line} uses {exc.name!r}, a placeholder without a prelude in "
                "tests/test_documented_blocks.py: add one"
            ) from exc
    for original in SUBSTITUTIONS:
        # a substitution whose text left the docs would hide nothing: keep the table honest
        assert original in "".join(b for p in DOCUMENTS for _, _, b in _blocks("python")), original


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--batchsize", "64"],  # an option renamed
        ["train", "--epochs", "two"],  # a value of the wrong type
        ["analyze", "pairs.npz", "--hist-bins", "many"],  # a number that is not one
        ["train", "simclr-vrn", "batchsize=64"],  # an override that names no option
        ["analyse", "pairs.npz"],  # a command that does not exist
    ],
)
def test_a_drifted_command_line_fails_the_check(args):
    from cl_diag.errors import UserError

    # the parser's usage error (typer carries its own click: found through typer's public class)
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    with pytest.raises((usage_error, UserError, AssertionError)):
        test_every_documented_command_line_parses(args)
