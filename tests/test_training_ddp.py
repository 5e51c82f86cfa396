"""DDP under torchrun with two gloo processes on CPU against one process on the same global batch.

Setup: the toy dataset (8 free vectors per view, no BatchNorm, whose per-rank statistics
would legitimately differ), global batch 8 = the whole dataset, so epoch k is step k and
metrics.csv holds every step's loss. Rank r takes rows 4r..4r+3 of each global batch and
the loss library gathers the embeddings of both ranks with gradients.

Tolerances: the first step's loss is computed on bit-identical gathered inputs, so it must
agree to 1e-6 relative; afterwards the gradients differ only in float summation order
(all-reduce), so losses agree to 1e-5 and the weights after 5 SGD-momentum steps to 1e-5
absolute (the vectors have norms of order 1). Measured on CPU: both differences are exactly 0.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_diag.models import build_model
from cl_diag.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
BASE = [
    "train",
    "--dataset",
    "toy",
    "--num-samples",
    "8",
    "--dim",
    "5",
    "--batch-size",
    "8",
    "--steps",
    "5",
    "--lr",
    "0.5",
    "--seed",
    "2",
    "--quiet",
]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _losses(out: Path) -> list[float]:
    return [float(r["loss"]) for r in csv.DictReader(open(out / "metrics.csv"))]


@pytest.mark.parametrize(
    "extra",
    [
        # each case starts torchrun twice: the full suite runs them
        pytest.param(["--loss", "simclr", "--vrn", "3"], marks=pytest.mark.slow),
        # labels gathered across ranks too; slow only because torchrun starts twice
        pytest.param(["--loss", "supcon", "--temperature", "0.5"], marks=pytest.mark.slow),
        # the queue is filled with the gathered global batch: the same queue on every rank as
        # in one process (keys from a momentum copy of the free vectors; it wraps at step 3)
        pytest.param(
            ["--loss", "infonce", "--queue", "12", "--key-momentum", "0.5", "--vrn", "1"],
            marks=pytest.mark.slow,
        ),
    ],
    ids=["simclr-vrn", "supcon", "queue"],
)
def test_two_gloo_ranks_match_one_process(tmp_path, extra):
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    cmd = [*BASE, *extra]
    one = subprocess.run(
        [sys.executable, "-m", "cl_diag", *cmd, "--out", str(single)],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "cl_diag",
            *cmd,
            "--out",
            str(ddp),
        ],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("trained 5 steps") == 1  # only rank 0 reports (and writes)

    a, b = _losses(single), _losses(ddp)
    assert len(a) == len(b) == 5
    assert b[0] == pytest.approx(a[0], rel=1e-6)
    assert b == pytest.approx(a, rel=1e-5)
    wa = load_checkpoint(single / "last.pt")["backbone"]["weight"]
    wb = load_checkpoint(ddp / "last.pt")["backbone"]["weight"]
    assert torch.allclose(wa, wb, rtol=0, atol=1e-5), (wa - wb).abs().max()
    if "--queue" in extra:
        qa, qb = (load_checkpoint(out / "last.pt") for out in (single, ddp))
        assert torch.allclose(qa["queue"]["keys"], qb["queue"]["keys"], rtol=0, atol=1e-5)
        assert int(qb["queue"]["filled"]) == 12 and int(qb["queue"]["pointer"]) == (5 * 8) % 12
        ka, kb = qa["key_encoder"]["backbone"]["weight"], qb["key_encoder"]["backbone"]["weight"]
        assert torch.allclose(ka, kb, rtol=0, atol=1e-5)
    # the weights moved, so the comparison is not vacuous
    w0 = build_model(load_checkpoint(single / "last.pt")["config"], seed=2).backbone.weight.detach()
    assert (wa - w0).abs().max() > 1e-2
