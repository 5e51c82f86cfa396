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
