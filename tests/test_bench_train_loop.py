"""benchmarks/bench_train_loop.py, the instrument of issue 10's loop targets, cannot rot: its
lock step gives each loop one turn a round, its verdicts follow the intervals, and a tiny run
prints every line (no timing is asserted: speed is the benchmark's to show, not a test's)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_train_loop.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_train_loop", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_lock_step_gives_every_running_loop_one_turn_a_round():
    bench = _bench()
    log: list[tuple[str, int]] = []

    def loop(name: str, steps: int):
        def run(turns):
            turns.start(total_steps=steps, done_steps=0, epochs=1)  # after the set-up
            for k in range(1, steps + 1):
                log.append((name, k))
                turns.step(k, 1)

        return run

    lock_step = bench.LockStep(seed=3, clock=_Clock(), sync=False)
    lock_step.run({"a": loop("a", 3), "b": loop("b", 3), "c": loop("c", 1)})
    rounds = [sorted(log[0:3]), sorted(log[3:5]), sorted(log[5:7])]
    assert rounds == [[("a", 1), ("b", 1), ("c", 1)], [("a", 2), ("b", 2)], [("a", 3), ("b", 3)]]
    assert {name: len(t) for name, t in lock_step.turns.items()} == {"a": 3, "b": 3, "c": 1}
    assert all(t > 0 for turns in lock_step.turns.values() for t in turns)


def test_lock_step_raises_a_loops_error():
    bench = _bench()

    def broken(turns):
        turns.start(total_steps=1, done_steps=0, epochs=1)
        raise RuntimeError("a loop failed")

    def fine(turns):
        turns.start(total_steps=1, done_steps=0, epochs=1)
        turns.step(1, 1)

    with pytest.raises(RuntimeError, match="a loop failed"):
        bench.LockStep(seed=0, clock=_Clock(), sync=False).run({"ok": fine, "bad": broken})


def test_verdicts_follow_the_interval_and_the_bootstrap_of_constant_rounds_is_a_point():
    bench = _bench()
    assert bench.verdict(0.981, 1.01, at_least=0.98) == "met"
    assert bench.verdict(0.97, 0.99, at_least=0.98) == "inconclusive"
    assert bench.verdict(0.95, 0.979, at_least=0.98) == "not met"
    assert bench.verdict(1.00, 1.029, below=1.03) == "met"
    assert bench.verdict(1.02, 1.04, below=1.03) == "inconclusive"
    assert bench.verdict(1.03, 1.05, below=1.03) == "not met"
    rounds = np.full((40, 4), 0.02)
    assert bench.block_bootstrap(lambda r: float(r[:, 0].sum() / r[:, 1].sum()), rounds, 10) == (
        pytest.approx(1.0),
        pytest.approx(1.0),
    )
    rng = np.random.default_rng(0)
    noisy = rng.normal(1.0, 0.1, size=(200, 1))
    low, high = bench.block_bootstrap(lambda r: float(r.mean()), noisy, 10)
    assert low < noisy.mean() < high and high - low < 0.1


@pytest.mark.slow
def test_a_tiny_run_prints_every_line():
    tiny = ["--data", "cached", "--epochs", "4", "--num-samples", "128", "--batch-size", "32"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *tiny],
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("hand-written", "hand-written again", "cl-diag", "cl-diag --vrn 30"):
        assert re.search(rf"^{re.escape(name)} +[\d.]+ +\d+ +[\d.]+ ms$", out, re.M), name
    number = r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]"
    assert re.search(rf"^control, .*: {number} per step .* {number} whole loop; how far", out, re.M)
    for line in ("cl-diag / hand-written: ", "cl-diag --vrn 30 / cl-diag, time: "):
        assert re.search(
            rf"^{re.escape(line)}{number} per step .*target .*: (met|not met|inconclusive)$",
            out,
            re.M,
        ), line
    assert re.search(r"^checkpoint write per epoch: [\d.]+ ms", out, re.M)
