"""Resume: a run SIGKILLed mid-training and resumed ends bit-identical to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_diag.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
# Small enough for seconds, big enough that the kill lands mid-run: 6 steps per epoch.
ARGS = [
    "--num-samples",
    "192",
    "--batch-size",
    "32",
    "--epochs",
    "4",
    "--warmup-epochs",
    "1",
    "--seed",
    "3",
    "--quiet",
]


def _env() -> dict[str, str]:
    # The same thread count in every process: CPU kernels are bit-reproducible per thread count.
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _train(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cl_diag", "train", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def _assert_same_state(a: dict, b: dict) -> None:
    for part in ("backbone", "projector"):
        assert a[part].keys() == b[part].keys()
        for k in a[part]:
            assert torch.equal(a[part][k], b[part][k]), f"{part}.{k} differs"
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k]["momentum_buffer"], sb[k]["momentum_buffer"])
    assert (a["epoch"], a["step"]) == (b["epoch"], b["step"])
    timing = {"seconds", "images_per_s"}
    for ra, rb in zip(a["metrics"], b["metrics"], strict=True):
        assert {k: v for k, v in ra.items() if k not in timing} == {
            k: v for k, v in rb.items() if k not in timing
        }


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    reference = _train(*ARGS, "--out", tmp_path / "ref")
    victim = _train(*ARGS, "--out", tmp_path / "killed")
    # Kill right after the second epoch's line: the process is then writing epoch 2's
    # checkpoint or already in epoch 3, i.e. mid-run.
    for line in victim.stdout:
        if line.startswith("epoch 2/"):
            victim.send_signal(signal.SIGKILL)
            break
    victim.wait(timeout=60)
    assert victim.returncode == -signal.SIGKILL
    partial = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert 1 <= partial["epoch"] < 4 and not partial["complete"]

    resumed = _train("--resume", tmp_path / "killed" / "last.pt", "--quiet")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert reference.wait(timeout=300) == 0, reference.stderr.read()

    a = load_checkpoint(tmp_path / "ref" / "last.pt")
    b = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert a["complete"] and b["complete"] and a["step"] == 4 * 6
    _assert_same_state(a, b)
    assert b["config"]["resume"].endswith("last.pt")
