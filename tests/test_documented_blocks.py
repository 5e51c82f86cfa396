"""Every documented block runs (issue 37 item 7): each ``bash`` and ``python`` block of README.md
and docs/*.md is extracted and checked here, so a doc that drifts from the code fails CI.

* Every ``cl-diag`` command line (and ``torchrun ... -m cl_diag ...``) in a bash block is parsed
  by the CLI's own parser, as ``cl-diag`` would parse it (key=value overrides included): the
  command and every option exist and every value has its declared type (a choice among words
  is checked when the command runs).
* Every command line is then **run**, in document order, in one folder that holds what the prose
  assumes (:func:`workspace`: a trained run ``runs/a``, ``clip.npz``, ...): as written, or shrunk
  (:data:`RUN_AS`: fewer steps, images and cells, the same command and options otherwise), unless
  it needs what a test machine cannot have (:data:`NOT_RUN`, each with its reason; the repository
  files such a line names must still exist).
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

#: training lines run with these (one epoch of 256 images: the command and its options are what
#: is checked, not the training)
_SHORT = "--epochs 1 --num-samples 256"
#: documented line -> the line the suite runs instead: the same command and options, shrunk
RUN_AS = {
    "train": f"train {_SHORT}",
    "train --recipe simclr-vrn": f"train --recipe simclr-vrn {_SHORT}",
    "train --loss dcl --vrn 30 --batch-size 32 --out runs/dcl-vrn-b32": (
        f"train --loss dcl --vrn 30 --batch-size 32 --out runs/dcl-vrn-b32 {_SHORT}"
    ),
    "train trainers/simclr-vrn.toml --batch-size 64 --out runs/vrn-b64": (
        f"train trainers/simclr-vrn.toml --batch-size 64 --out runs/vrn-b64 {_SHORT}"
    ),
    "train simclr-vrn batch-size=64 vrn=3 out=runs/vrn3-b64": (
        "train simclr-vrn batch-size=64 vrn=3 out=runs/vrn3-b64 epochs=1 num-samples=256"
    ),
    "train --loss supcl --alpha 0.3 --balanced-batch --batch-size 100": (
        f"train --loss supcl --alpha 0.3 --balanced-batch --batch-size 100 {_SHORT}"
    ),
    "analyze runs/dcl-vrn-b32/last.pt --probe quick": (
        "analyze runs/dcl-vrn-b32/last.pt --probe quick --num-images 128 --no-baselines"
    ),
    "analyze runs/big/last.pt --encode-batch-size 128": (
        "analyze runs/big/last.pt --encode-batch-size 128 --probe quick --num-images 128"
        " --no-baselines"
    ),
    "sweep trainers/simclr.toml --grid batch-size=16,32,64,128 --grid vrn=0,30 --epochs 5 "
    "--out sweeps/bs": (
        "sweep trainers/simclr.toml --grid batch-size=32,64 --grid vrn=0 --epochs 1 "
        "--num-samples 256 --probe tiny.toml --out sweeps/bs"
    ),
    "sweep trainers/simclr.toml --grid batch-size=16,64 --grid seed=1,2,3 --equal-steps 300 "
    "--out sweeps/eq": (
        "sweep trainers/simclr.toml --grid batch-size=32,64 --grid seed=1 --equal-steps 4 "
        "--num-samples 256 --probe tiny.toml --out sweeps/eq"
    ),
}
#: documented line -> why the suite does not run it (it is parsed; the files it names exist)
NOT_RUN = {
    "sweep trainers/simclr.toml --grid batch-size=16,64 --grid vrn=0,3,30 "
    "--grid seed=11,12,13,14,15,16 --equal-steps 200 --probe probes/digits-study.toml "
    "--plan plans/main-job.toml --out runs/digits-batch-study": (
        "the main job: 36 runs, about 5 minutes on 2 cores, and its plan refuses a smaller grid; "
        "run as written before each stop (the closing notes)"
    ),
    "train --dataset cifar100 --data-root ~/data --arch resnet18-cifar --epochs 200 "
    "--device cuda": "CIFAR-100 and a GPU",
    "train --dataset cifar10 --data-root ~/data": "CIFAR-10",
    "analyze solo-run/simclr-ep=199.ckpt --dataset cifar100 --data-root ~/data --out a/": (
        "CIFAR-100"
    ),
    "analyze resnet18.pth --arch resnet18-cifar --dataset cifar10 --data-root ~/data --out b/": (
        "CIFAR-10"
    ),
    "reproduce reports/digits-batch-study": (
        "trains the 36 runs of the committed study again (minutes); tests/test_reproduce.py "
        "reproduces a small study"
    ),
    "reproduce reports/digits-batch-study --runs 6": "trains 6 of its 200-step runs again",
}
#: a probe suite small enough for the suite's sweeps (written into the workspace)
TINY_PROBES = """num-images = 128
layers = "all"
probes = "knn"
baselines = false
probe-train-images = 200
probe-test-images = 100
device = "cpu"
"""

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


def _workspace(run_cli, folder: Path) -> None:
    """What the prose around the command lines assumes, made in ``folder``: the repository's
    recipes and probe suites, a trained run ``runs/a`` (and ``runs/big``) with its analyses,
    ``big.npz``, ``clip.npz`` and its analysis ``clip/analysis``, and tiny.toml."""
    import shutil

    for name in ("trainers", "probes", "plans"):  # read only (reports/ is written to)
        (folder / name).symlink_to(ROOT / name)
    (folder / "tiny.toml").write_text(TINY_PROBES, encoding="utf-8")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 400, 16)).astype(np.float32)
    np.savez(folder / "big.npz", z1=z[0], z2=z[0] + 0.5 * z[1])
    np.savez(folder / "clip.npz", image_embeds=z[0] + 2.0, text_embeds=z[0] + z[1])
    quick = ("--probe", "tiny.toml")
    made = [
        ("train", *_SHORT.split(), "--out", "runs/a", "--quiet"),
        ("analyze", "runs/a/last.pt", *quick),  # runs/a/last-analysis
        ("analyze", "runs/a/last.pt", *quick, "--out", "runs/a/analysis"),
        ("analyze", "clip.npz", "--keys", "image_embeds,text_embeds", "--out", "clip/analysis"),
    ]
    for args in made:
        result = run_cli(*args)
        assert result.code == 0, (args, result.err)
    (folder / "runs" / "big").mkdir()
    shutil.copy(folder / "runs" / "a" / "last.pt", folder / "runs" / "big" / "last.pt")


@pytest.mark.slow
def test_every_documented_command_line_runs(run_cli, tmp_path, monkeypatch):
    """Each command line of the docs, in document order, in a folder holding what the prose
    assumes: it ends with status 0 (a drift at run time, such as an output folder renamed, fails
    here with the doc's line)."""
    import glob

    monkeypatch.chdir(tmp_path)
    _workspace(run_cli, tmp_path)
    documented = [(p.id, list(p.values[0])) for p in BASH_COMMANDS]
    lines = {" ".join(words) for _, words in documented}
    # the tables name documented lines only: an entry whose line left the docs would hide nothing
    assert set(RUN_AS) <= lines and set(NOT_RUN) <= lines, (set(RUN_AS) | set(NOT_RUN)) - lines
    for where, words in documented:
        line = " ".join(words)
        if line in NOT_RUN:
            for word in shlex.split(line):  # the repository files it names exist
                if word.split("/")[0] in ("trainers", "probes", "plans", "reports"):
                    assert (ROOT / word).exists(), (where, word)
            continue
        args = shlex.split(RUN_AS[line]) if line in RUN_AS else words
        # the shell's globbing, as a user's shell expands runs/*/last-analysis
        args = [a for w in args for a in (sorted(glob.glob(w)) if "*" in w else [w])]
        result = run_cli(*args)
        assert result.code == 0, (where, RUN_AS.get(line, line), result.err[-3000:])


def _python_documents() -> dict[Path, list[tuple[int, str]]]:
    documents: dict[Path, list[tuple[int, str]]] = {}
    for path, line, block in _blocks("python"):
        documents.setdefault(path, []).append((line, block))
    return documents


@pytest.mark.slow
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
