"""``cl-diag sweep``: grid parsing, every cell trained and analysed, resume by skipping, bad
input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cl_diag.orchestration.sweep import GridAxis, cells_of, parse_grid

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "trainers" / "rebuttal-toy.toml"


def test_parse_grid_and_cells():
    axes = parse_grid(["batch-size=16,32", "--vrn=0,30"], {"batch_size": int, "vrn": float})
    assert axes == [GridAxis("batch_size", ("16", "32")), GridAxis("vrn", ("0", "30"))]
    names = [cell.name for cell in cells_of(axes)]
    assert names == [
        "batch-size=16_vrn=0",
        "batch-size=16_vrn=30",
        "batch-size=32_vrn=0",
        "batch-size=32_vrn=30",
    ]


@pytest.mark.slow
def test_sweep_trains_analyses_compares_and_skips_complete_cells(run_cli, tmp_path):
    out = tmp_path / "sweep"
    args = [
        "sweep",
        TOY,
        "--grid",
        "seed=1,2",
        "--grid",
        "vrn=0,3",
        "--steps",
        "20",
        "--out",
        out,
        "--quiet",
    ]
    first = run_cli(*args)
    assert first.code == 0, first.err
    cells = ["seed=1_vrn=0", "seed=1_vrn=3", "seed=2_vrn=0", "seed=2_vrn=3"]
    for cell in cells:
        result = json.loads((out / cell / "analysis" / "result.json").read_text())
        config = result["config"]
        # The grid values and the shared override (--steps 20) reached every cell's training run.
        assert config["seed"] == int(cell[5])
        assert config["vrn"] == float(cell.split("vrn=")[1])
        assert config["steps"] == 20
    csv = (out / "comparison" / "comparison.csv").read_text()
    assert csv.count("\n") >= 5  # header + one row per run (and layer)
    assert (out / "comparison" / "report.html").is_file()

    # An interrupted sweep: one cell lost its analysis. A rerun redoes only that cell.
    stamp = {c: (out / c / "analysis" / "result.json").stat().st_mtime_ns for c in cells}
    (out / "seed=2_vrn=3" / "analysis" / "result.json").unlink()
    second = run_cli(*args)
    assert second.code == 0, second.err
    assert "skipped 3 complete cell(s)" in " ".join(second.out.split())
    for cell in cells[:3]:
        assert (out / cell / "analysis" / "result.json").stat().st_mtime_ns == stamp[cell]
    assert (out / "seed=2_vrn=3" / "analysis" / "result.json").is_file()

    # A rerun with other options must not pass the old cells off as trained with them.
    stamp = {c: (out / c / "analysis" / "result.json").stat().st_mtime_ns for c in cells}
    third = run_cli(*args, "--lr", "0.1")
    assert third.code == 2, (third.out, third.err)
    message = " ".join(third.err.split())
    assert "Sweep cell seed=1_vrn=0:" in message and "--lr 0.1 (the checkpoint has 0.5)" in message
    assert "Traceback" not in third.err
    for cell in cells:
        assert (out / cell / "analysis" / "result.json").stat().st_mtime_ns == stamp[cell]


@pytest.mark.parametrize(
    "grid, fragment",
    [
        ([], "grid is empty"),
        (["--grid", "bogus=1,2"], "'bogus' is not a recipe option"),
        (["--grid", "out=a,b"], "'out' is not a recipe option"),
        (["--grid", "seed"], "is not key=v1,v2"),
        (["--grid", "seed=1,1"], "repeats a value"),
        (["--grid", "seed=1", "--grid", "seed=2"], "twice"),
        # a value of the wrong type, or out of range in a later cell: refused before the first cell
        # trains
        (
            ["--grid", "batch-size=abc"],
            "sweep cell batch-size=abc: the train options are not valid",
        ),
        (
            ["--grid", "batch-size=2,1"],
            "sweep cell batch-size=1: --batch-size 1 must be in [2, 1048576] (a batch of 1 has no",
        ),
        (["--grid", "lr=0.5,-1"], "sweep cell lr=-1: --lr -1.0 must be > 0. nothing was trained"),
    ],
)
def test_bad_grid(run_cli, tmp_path, grid, fragment):
    out = tmp_path / "sweep"
    result = run_cli("sweep", TOY, *grid, "--out", out)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    assert fragment.lower() in " ".join(result.err.split()).lower()
    assert not out.exists()


def test_bad_train_override_fails_before_any_cell(run_cli, tmp_path):
    out = tmp_path / "sweep"
    result = run_cli("sweep", TOY, "--grid", "seed=1,2", "--epochz", "3", "--out", out)
    assert result.code == 2
    assert "--epochz" in result.err
    assert not out.exists()


def test_recipe_with_unknown_key(run_cli, tmp_path):
    recipe = tmp_path / "bad.toml"
    recipe.write_text('loss = "simclr"\nbatchsize = 3\n')
    out = tmp_path / "sweep"
    result = run_cli("sweep", recipe, "--grid", "seed=1,2", "--out", out)
    assert result.code == 2
    assert "'batchsize' is not an option" in " ".join(result.err.split())
    assert not out.exists()


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
def test_parallel_cells_run_in_worker_processes_as_they_run_here(run_cli, tmp_path, monkeypatch):
    # three cells on --parallel 2: two worker processes, one of them running two cells, each
    # cell's output in its own sweep.log
    from cl_diag.orchestration import sweep as sweep_module

    started = []
    start = sweep_module._Children.start

    def counted(self, command, **kwargs):
        started.append(command)
        return start(self, command, **kwargs)

    monkeypatch.setattr(sweep_module._Children, "start", counted)
    out = tmp_path / "sweep"
    grid = ("--grid", "vrn=0,1,3", "--steps", "10")
    result = run_cli("sweep", TOY, *grid, "--parallel", "2", "--out", out, "--quiet")
    assert result.code == 0, result.err
    assert len(started) == 2
    for cell in ("vrn=0", "vrn=1", "vrn=3"):
        assert (out / cell / "analysis" / "result.json").is_file()
        log = (out / cell / "sweep.log").read_text()
        assert log.count("trained 10 steps") == 1 and f"{cell}/analysis/report.html" in log
    assert (out / "comparison" / "report.md").is_file()
    # a cell in a worker is the run a one-process sweep makes: the same weights, and on a CPU
    # the same fingerprint (no CUDA_VISIBLE_DEVICES set for it). The one-process sweep runs in
    # a fresh interpreter: this test process's torch flags are whatever earlier tests' imports
    # left them at
    serial = tmp_path / "serial"
    again = subprocess.run(
        [sys.executable, "-m", "cl_diag", "sweep", str(TOY), *grid, "--out", str(serial), "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert again.returncode == 0, again.stderr
    for cell in ("vrn=0", "vrn=1", "vrn=3"):
        apart, here = (
            json.loads((root / cell / "analysis" / "result.json").read_text())
            for root in (out, serial)
        )
        assert apart["source"]["weights_sha256"] == here["source"]["weights_sha256"]
        assert apart["environment"] == here["environment"]
        assert apart["layers"] == here["layers"]


@pytest.mark.slow
def test_a_parallel_cell_that_fails_stops_the_sweep_with_its_log(run_cli, tmp_path):
    # a cell's error (here: a data root that is not there) ends the sweep with exit 2, naming
    # the cell and quoting its log, and no comparison
    out = tmp_path / "sweep"
    result = run_cli(
        "sweep",
        TOY,
        "--grid",
        "vrn=0,3",
        "--steps",
        "2",
        "--parallel",
        "2",
        "--out",
        out,
        "-q",
        "--dataset",
        "cifar10",
        "--data-root",
        tmp_path / "nowhere",
    )
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    assert "Sweep cell vrn=" in result.err and "failed (exit 2)" in result.err
    assert not (out / "comparison").exists()


@pytest.mark.slow  # a process of its own, which imports torch
def test_a_cell_worker_that_crashes_writes_the_traceback_to_the_cells_log(tmp_path):
    """An unexpected error in a cell (not a user's mistake: here a spec naming no such
    option, a TypeError) is answered as a failed cell with its traceback in the cell's
    sweep.log, the log the sweep's error sends the user to; the worker takes the next cell."""
    specs = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        spec = {"train": {"no_such_option": 1}, "folder": str(tmp_path / name), "analysis": {}}
        specs.append(json.dumps(spec))
    worker = subprocess.run(
        [sys.executable, "-m", "cl_diag.orchestration.sweep"],
        input="\n".join(specs) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    assert worker.stdout.split() == ["1", "1"]
    for name in ("first", "second"):
        log = (tmp_path / name / "sweep.log").read_text()
        assert "Traceback" in log and "TypeError" in log and "no_such_option" in log, log
    assert "Traceback" not in worker.stderr


#: a cell worker whose cell is interrupted where Python wraps the KeyboardInterrupt: a class
#: body's ``__set_name__`` during an import (matplotlib's, in a CI run) raises a RuntimeError
#: caused by it
_WRAPPED_INTERRUPT = """
import sys
import cl_diag.orchestration.sweep as sweep

def interrupted_in_an_import(spec):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise RuntimeError("Error calling __set_name__ on 'set_yticks'") from exc

sweep._run_cell = interrupted_in_an_import
sys.exit(sweep._cell_main())
"""


@pytest.mark.slow  # a process of its own, which imports torch
def test_an_interrupt_wrapped_in_another_error_stops_the_cell_as_an_interrupt(tmp_path):
    spec = {"train": {}, "folder": str(tmp_path), "analysis": {}}
    worker = subprocess.run(
        [sys.executable, "-c", _WRAPPED_INTERRUPT],
        input=json.dumps(spec) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert worker.returncode == 130, worker.stderr
    assert worker.stdout == ""  # no exit status answered: the sweep reads the worker's
    log = (tmp_path / "sweep.log").read_text()
    assert "interrupted: the sweep resumes this cell" in log and "Traceback" not in log, log


def test_parallel_cells_take_the_visible_gpus_in_turn_and_leave_a_cpu_alone(monkeypatch):
    from cl_diag.orchestration.sweep import _cell_gpu

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert [_cell_gpu(slot) for slot in range(3)] == ["2", "5", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible: nothing to choose
    assert _cell_gpu(1) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    assert _cell_gpu(1) is None
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    assert [_cell_gpu(slot) for slot in range(3)] == ["0", "1", "0"]


@pytest.mark.slow
def test_equal_steps_mode_holds_steps_and_warm_up_across_batch_sizes(run_cli, tmp_path):
    out = tmp_path / "sweep"
    result = run_cli(
        "sweep",
        TOY,
        "--grid",
        "batch-size=2,4",
        "--grid",
        "seed=1,2",
        "--equal-steps",
        "8",
        "--out",
        out,
        "--quiet",
    )
    assert result.code == 0, result.err
    configs = {}
    for m in (2, 4):
        for seed in (1, 2):
            config = json.loads(
                (out / f"batch-size={m}_seed={seed}" / "analysis" / "result.json").read_text()
            )["config"]
            configs[(m, seed)] = config
            # the same steps and warm-up for every batch size: the recipe's warm-up fraction
            # (warmup_epochs / epochs) of the 8 steps
            assert config["steps"] == 8 and config["batch_size"] == m
            assert config["warmup_steps"] == round(8 * config["warmup_epochs"] / config["epochs"])
    md = (out / "comparison" / "report.md").read_text(encoding="utf-8")
    # seeds are replicates: the Findings test the batch-size trend over all four runs
    # issue 24: the headline (verdict counts, the numbers, the figure), the contents, then the
    # Findings, the first section
    assert md.startswith("# cl-diag comparison\n\n**Findings: ")
    assert md.index("**Contents**") < md.index("## Findings") < md.index("## Runs")
    assert "Smaller batches give a larger negative-similarity variance" in md
    assert "over 4 runs at 2 batch sizes" in md


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--grid", "steps=5,6"], "the grid cannot vary --steps"),
        (["--grid", "warmup-steps=1,2"], "the grid cannot vary --warmup-steps"),
        (["--steps", "3"], "drop --steps"),
        (["--equal-steps", "0"], "--equal-steps 0 must be in [1, 1000000000000]"),
    ],
)
def test_equal_steps_refusals(run_cli, tmp_path, extra, fragment):
    out = tmp_path / "sweep"
    args = ["sweep", TOY, "--grid", "seed=1,2", *extra, "--out", out]
    if "--equal-steps" not in extra:
        args[4:4] = ["--equal-steps", "5"]
    result = run_cli(*args)
    assert result.code == 2, (result.out, result.err)
    assert fragment in " ".join(result.err.split())
    assert "Traceback" not in result.err
    assert not out.exists()


@pytest.mark.slow
def test_a_quiet_sweep_prints_a_line_per_run_and_no_training_rows(run_cli, tmp_path):
    # issue 37: a sweep or reproduction without a bar printed every metrics row of every run (a
    # free-embedding run of 2,000 one-step epochs: 2,000 lines); now one line per run done
    recipe = Path(__file__).resolve().parents[1] / "trainers" / "rebuttal-toy.toml"
    done = run_cli(
        "sweep", recipe, "--grid", "seed=1,2", "--steps", "20", "--out", tmp_path / "s", "--quiet"
    )
    assert done.code == 0, done.err
    lines = [line for line in done.out.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("[")] == [
        "[1/2] seed=1 done",
        "[2/2] seed=2 done",
    ]
    assert not any(line.startswith("epoch ") for line in lines), lines
