"""Shared helpers: run the CLI in-process and capture its exit status and output."""

from __future__ import annotations

import numpy as np
import pytest

from cl_diag.cli import main


class CliRun:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


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
