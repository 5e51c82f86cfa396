"""Shared fixtures: the CLI run in-process (``run_cli``), small inputs (``pairs_file``,
``tiny_imagefolder``), cl-diag checkpoints written as the trainer writes them
(``make_checkpoint``), a child process under a memory cap (``capped_cli``) and one trained
digits run that every test needing a trained model shares (``trained_digits``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Before torch (and its OpenMP runtime, which reads this once, when it loads) is imported: GNU
# OpenMP's idle threads spin by default, and once torch.set_num_threads has changed the team
# (the pair pass and deterministic_mode run single-threaded, then restore the count) every
# small op after it costs 10-20 times the CPU on 2 shared cores (600 Adam steps on 8 x 8
# embeddings: 0.5 CPU-s before, 10 after). Waiting threads that sleep change no number (the
# fingerprint does not record this variable), only the CPU the suite burns; children inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np
import pytest
from hypothesis import settings as hypothesis_settings

from cl_diag.cli import main

# The fuzz tests' examples: in CI a function of each test (derandomize), the same on every
# machine, so that a run passes or fails on the code alone; a developer explores new inputs with
# `python -m pytest tests/test_reliability_fuzz.py --hypothesis-profile explore` (or
# HYPOTHESIS_PROFILE=explore), and keeps what it finds as an explicit case.
hypothesis_settings.register_profile("ci", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _tables_line_up(monkeypatch):
    """Every rich table the CLI prints in any test has one header per cell: rich would add an
    untitled column for a row's extra cell, shifting what the reader sees under each header
    (the reproduce summary once showed p-values under "borderline")."""
    from rich.table import Table

    add_row = Table.add_row

    def checked(self, *cells, **kwargs):
        # a table whose columns were declared (typer's help grids declare none: rich adds them)
        assert not self.columns or len(cells) == len(self.columns), (
            f"a row of {len(cells)} cells in the table {self.title!r} of {len(self.columns)} "
            f"columns: {[c.header for c in self.columns]}"
        )
        return add_row(self, *cells, **kwargs)

    monkeypatch.setattr(Table, "add_row", checked)


class CliRun:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


def refused(result, *fragments: str) -> str:
    """A user's mistake as the CLI must end it: exit 2, one ``error:`` paragraph on stderr
    holding every fragment, no traceback; the paragraph, whitespace collapsed."""
    assert result.code == 2, (result.code, result.out[-2000:], result.err[-2000:])
    assert "Traceback" not in result.err and "Traceback" not in result.out
    message = " ".join(result.err.split())
    assert message.startswith("error: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


@pytest.fixture
def run_cli(capsys):
    """Call ``cl-diag ARGS...`` in-process; return exit code, stdout and stderr."""

    def _run(*args: str) -> CliRun:
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:  # typer/click always exit via SystemExit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return _run


@pytest.fixture
def pairs_file(tmp_path):
    """A small embeddings file with labels: 60 instances, d = 8, 3 classes."""
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((60, 8)).astype(np.float32)
    z2 = (z1 + 0.3 * rng.standard_normal((60, 8))).astype(np.float32)
    labels = np.arange(60) % 3
    path = tmp_path / "pairs.npz"
    np.savez(path, z1=z1, z2=z2, labels=labels)
    return path


@pytest.fixture
def tiny_imagefolder(tmp_path):
    """A tiny ImageFolder pair written here: train/ (2 classes x 8 images) and val/ (2 x 4),
    32x32 RGB PNGs whose mean colour depends on the class. Returns (train root, val root)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    roots = []
    for split, per_class in (("train", 8), ("val", 4)):
        root = tmp_path / "images" / split
        for label, colour in enumerate(((200, 60, 60), (60, 60, 200))):
            folder = root / f"class{label}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.normal(colour, 40.0, size=(32, 32, 3)).clip(0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
        roots.append(root)
    return roots[0], roots[1]


# --------------------------------------------------------------------------- checkpoints


class CheckpointMaker:
    """Writes cl-diag checkpoints as ``cl-diag train`` does (its resolved config, model builder
    and writer), untrained: ``make_checkpoint(path, dataset="digits", **options)`` -> path.

    ``options`` are TrainConfig fields over its defaults (and a batch of 32, the CPU);
    ``seed`` draws the weights (``build_model(config, seed=seed)`` rebuilds them);
    ``epoch``/``step``/``complete`` say where the run stands. ``crafted(source, target,
    config={...}, **keys)`` writes a copy with config values or top-level keys changed, as a
    damaged or hostile file would hold them (nothing checks them on the way)."""

    def __call__(
        self,
        path,
        *,
        dataset: str = "digits",
        seed: int = 3,
        epoch: int = 0,
        step: int = 0,
        complete: bool = False,
        **options,
    ):
        from cl_diag.models import build_model
        from cl_diag.orchestration.train import TrainConfig, resolve_config
        from cl_diag.training.checkpoint import FORMAT, FORMAT_VERSION, save_checkpoint
        from cl_diag.training.data import training_data

        options.setdefault("batch_size", 32)
        options.setdefault("device", "cpu")
        # the options as the trainer resolves and records them (arch, projector, delta, ...)
        config = resolve_config(TrainConfig(dataset=dataset, **options), world=1).record()
        data = training_data(dataset, seed=0, num_samples=config["num_samples"])
        model = build_model(config, seed=seed)
        checkpoint = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "config": config,
            "dataset": dataset,
            "n_train": data.n_train,
            "split": data.split,
            "backbone": model.backbone.state_dict(),
            "projector": model.projector.state_dict(),
            "epoch": epoch,
            "step": step,
            "complete": complete,
        }
        if dataset == "toy":
            z1, z2 = model.backbone.views()
            checkpoint["embeddings"] = {"z1": z1, "z2": z2}
        save_checkpoint(path, checkpoint)
        return path

    @staticmethod
    def crafted(source, target, *, config=None, **keys):
        import torch

        payload = torch.load(source, weights_only=True)
        payload["config"].update(config or {})
        payload.update(keys)
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(payload, target)
        return target


@pytest.fixture
def make_checkpoint():
    """:class:`CheckpointMaker`: a cl-diag checkpoint written as the trainer writes one."""
    return CheckpointMaker()


# --------------------------------------------------------------------------- a memory cap

_CAPPED_CHILD = """
import json, resource, sys
import torch  # noqa: F401  (mapped before the cap: what cl-diag holds once imported)
import cl_diag.orchestration.analyze  # noqa: F401
import cl_diag.orchestration.train  # noqa: F401
import cl_diag.training.augment  # noqa: F401
try:
    import timm  # noqa: F401
except ImportError:
    pass
from cl_diag.cli import main


def vm(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024


base = vm("VmSize")
resource.setrlimit(resource.RLIMIT_AS, (base + int(sys.argv[1]), resource.RLIM_INFINITY))
codes = []
for command in json.loads(sys.argv[2]):
    try:
        main(command)
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code)
exec(sys.argv[3])
print("codes", json.dumps(codes))
"""


class CappedRun:
    def __init__(self, completed):
        self.stdout, self.stderr = completed.stdout, completed.stderr
        lines = [line for line in self.stdout.splitlines() if line.startswith("codes ")]
        self.codes = json.loads(lines[-1][len("codes ") :]) if lines else None


@pytest.fixture
def capped_cli():
    """Run ``cl-diag`` commands (lists of arguments), then Python ``code``, in a child whose
    address space is capped (RLIMIT_AS) at what it holds with cl-diag, torch and timm
    imported plus ``headroom`` bytes: an allocation past it ends in a MemoryError, not in a
    machine that swaps. Returns the exit codes (``.codes``), ``.stdout`` and ``.stderr``."""

    def run(commands, headroom, code=""):
        completed = subprocess.run(
            [sys.executable, "-c", _CAPPED_CHILD, str(headroom), json.dumps(commands), code],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            timeout=600,
        )
        return CappedRun(completed)

    return run


# --------------------------------------------------------------------------- one trained model


@pytest.fixture(scope="session")
def trained_digits(tmp_path_factory):
    """ONE trained digits run for every test that needs a trained model: ``cl-diag train``
    with no options (SimCLR, the small CNN, 40 epochs on CPU, about 30 CPU-seconds), trained
    once per test session -- under pytest-xdist once for all workers, the first to ask
    training it under a lock in the session's shared temporary folder while the others wait.
    Returns the run folder (last.pt, metrics.csv); tests read it and write elsewhere."""
    import fcntl

    from cl_diag.cli import main

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "trained-digits"
    folder.mkdir(exist_ok=True)
    run = folder / "runs" / "digits-simclr"
    with open(shared / "trained-digits.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "done").is_file():
            cwd = os.getcwd()
            os.chdir(folder)  # the default --out: runs/digits-simclr under the working folder
            try:
                main(["train", "--quiet"])
            except SystemExit as exc:
                assert exc.code in (0, None), f"the shared digits run failed with exit {exc.code}"
            finally:
                os.chdir(cwd)
            (folder / "done").write_text("trained\n")
    assert (run / "last.pt").is_file() and (run / "metrics.csv").is_file()
    return run
