"""Interrupts (issue 11, case 1 and "Done when"): SIGINT and SIGKILL at random points of train,
analyze and sweep, then the rerun the tool asks for; the final result equals an uninterrupted
run's, and nothing the interrupted run left (temporary files, staging folders) survives it.

A kill point is the k-th call of a function in the child process: an optimizer step (mid-epoch)
or ``os.replace`` (the atomic writer's rename and the output moves: between writes, during the
final moves). The child announces that it reached it by creating a marker file, then waits
there; the test polls for the marker and sends the signal. So the point is exact and repeatable
(no guessed sleeps), and k is drawn by a seeded generator from the calls an uninterrupted run
makes, so that every phase of a run can be hit and CI draws the same points every time.
"""

from __future__ import annotations

import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fingerprint_free import strip_fingerprint

from cl_diag.training.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"
TIMING = {"seconds", "images_per_s"}


def default_signals() -> None:
    """The children's SIGINT and SIGTERM handlers set to the default before they start, so that
    the tests pass however the suite was started: a shell that ignores SIGINT (a background
    job, ``nohup``, ``trap '' INT``) passes SIG_IGN on to its children, and a Python started
    with SIGINT ignored never turns it into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def draw(*case: object) -> random.Random:
    """The generator a test case draws its kill point from: seeded by the case, so CI draws
    the same points every time, whichever tests run."""
    return random.Random(":".join(map(str, ("issue11", *case))))


_CHILD = """
import os, sys, time
hook, k, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
calls = 0

def pause():
    global calls
    calls += 1
    if calls == k:
        open(marker, "w").close()
        time.sleep(300)  # the test's signal arrives here

if hook == "replace":
    real_replace = os.replace

    def replace(*args, **kwargs):
        pause()
        return real_replace(*args, **kwargs)

    os.replace = replace
else:
    import torch

    real_step = torch.optim.SGD.step

    def step(self, *args, **kwargs):
        pause()
        return real_step(self, *args, **kwargs)

    torch.optim.SGD.step = step

from cl_diag.cli import main

main(sys.argv[4:])
"""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }


def without_long_cells(name: str, data: bytes) -> bytes:
    """An HTML report's bytes with its table cells' ``long`` class dropped: a cell gets it by
    the length of its text, and a path swapped for another of a different length keeps the
    class its own length gave it (a short ``--basetemp`` made the two folders differ there)."""
    return data.replace(b'<td class="long">', b"<td>") if name.endswith(".html") else data


def same_but_paths(
    a: Path, b: Path, here: Path, there: Path, *, fingerprints: bool = False
) -> bool:
    """Folder ``a`` holds the bytes of folder ``b`` once the paths under ``here`` it names are
    written as under ``there`` (the listing of owned files hashes the path-bearing files);
    with ``fingerprints``, the environment fingerprints aside (a part ran in a child with other
    threads: the same numbers, another environment)."""
    ours = {
        k: without_long_cells(k, v.replace(bytes(here), bytes(there)))
        for k, v in snapshot(a).items()
    }
    theirs = {k: without_long_cells(k, v) for k, v in snapshot(b).items()}
    assert ours.keys() == theirs.keys()
    if fingerprints:
        ours = {k: strip_fingerprint(k, v) for k, v in ours.items()}
        theirs = {k: strip_fingerprint(k, v) for k, v in theirs.items()}
    return {k: v for k, v in ours.items() if k != ".cl-diag-owned"} == {
        k: v for k, v in theirs.items() if k != ".cl-diag-owned"
    }


def interrupt(tmp_path: Path, sig: int, hook: str, k: int, *args) -> subprocess.CompletedProcess:
    """Run ``cl-diag ARGS`` in a child, stop it with ``sig`` at the k-th call of ``hook``."""
    marker = tmp_path / f"reached-{hook}-{k}"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, hook, str(k), str(marker), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
        preexec_fn=default_signals,
    )
    deadline = time.monotonic() + 240
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    reached = marker.exists()
    if child.poll() is None:
        child.send_signal(sig if reached else signal.SIGKILL)
    out, err = child.communicate(timeout=120)
    assert reached, f"the child never reached call {k} of {hook}: {err[-2000:]}"
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def assert_interrupted(done: subprocess.CompletedProcess, sig: int) -> None:
    if sig == signal.SIGKILL:
        assert done.returncode == -signal.SIGKILL
        return
    # SIGTERM is an interrupt like SIGINT (issue 26), with the status a shell gives it
    status = 143 if sig == signal.SIGTERM else 130
    assert done.returncode == status, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr
    assert done.stderr.count("interrupted: ") == 1, done.stderr[-3000:]


def count_calls(monkeypatch, run, *hooks: str) -> dict[str, int]:
    """How often an uninterrupted ``run()`` in this process calls each of ``hooks``."""
    calls = dict.fromkeys(hooks, 0)
    if "replace" in hooks:
        real = os.replace

        def replace(*args, **kwargs):
            calls["replace"] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(os, "replace", replace)
    if "step" in hooks:
        real_step = torch.optim.SGD.step

        def step(self, *args, **kwargs):
            calls["step"] += 1
            return real_step(self, *args, **kwargs)

        monkeypatch.setattr(torch.optim.SGD, "step", step)
    run()
    monkeypatch.undo()
    return calls


def cli(*args) -> None:
    """``cl-diag ARGS`` in this process (for module fixtures, which cannot use ``run_cli``)."""
    from cl_diag.cli import main

    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    assert done.value.code in (0, None), f"cl-diag {args[0]} failed with exit {done.value.code}"


def leftovers(folder: Path) -> list[str]:
    """Temporary files and staging folders anywhere under ``folder``."""
    return [
        p.relative_to(folder).as_posix()
        for p in Path(folder).rglob(".*")
        if p.name.endswith(".tmp") or "staging-" in p.name
    ]


def metric_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as stream:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(stream)]


def assert_same_run(a: Path, b: Path) -> None:
    """Two run folders hold the same trained state and the same metrics (timing aside)."""
    ca, cb = load_checkpoint(a / "last.pt"), load_checkpoint(b / "last.pt")
    assert ca["complete"] and cb["complete"]
    assert (ca["epoch"], ca["step"]) == (cb["epoch"], cb["step"])
    for part in ("backbone", "projector"):
        assert ca[part].keys() == cb[part].keys()
        for key in ca[part]:
            assert torch.equal(ca[part][key], cb[part][key]), f"{part}.{key} differs"
    for key in ("z1", "z2"):
        assert torch.equal(ca["embeddings"][key], cb["embeddings"][key])
    assert ca["optimizer"]["state"].keys() == cb["optimizer"]["state"].keys()
    for key, state in ca["optimizer"]["state"].items():
        for name, value in state.items():
            other = cb["optimizer"]["state"][key][name]
            assert torch.equal(value, other) if torch.is_tensor(value) else value == other
    assert metric_rows(a / "metrics.csv") == metric_rows(b / "metrics.csv")
    history = [{k: v for k, v in row.items() if k not in TIMING} for row in cb["metrics"]]
    assert len(history) == len(metric_rows(b / "metrics.csv")) == cb["epoch"]


# --------------------------------------------------------------------------- start-up

# The console script's entry point, with its import of the command line paused: the interrupt
# arrives while torch and the commands are being imported (issue 26: a KeyboardInterrupt
# traceback of the import under way).
_STARTING = """
import builtins, sys, time
marker = sys.argv[1]
real_import = builtins.__import__

def paused_import(name, *args, **kwargs):
    if name.startswith("cl_diag.cli"):
        builtins.__import__ = real_import
        open(marker, "w").close()
        time.sleep(300)  # the test's signal arrives here
    return real_import(name, *args, **kwargs)

builtins.__import__ = paused_import
sys.argv = ["cl-diag", "recipes"]
from cl_diag.__main__ import main
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_starting_is_one_line(tmp_path, sig):
    marker = tmp_path / "starting"
    child = subprocess.Popen(
        [sys.executable, "-c", _STARTING, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        preexec_fn=default_signals,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), child.communicate(timeout=60)
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    assert child.returncode == (143 if sig == signal.SIGTERM else 130), err
    assert err.splitlines() == ["interrupted: cl-diag stopped while starting; nothing was changed."]
    assert out == ""


# --------------------------------------------------------------------------- train


TRAIN = ["train", TOY, "--steps", "40", "--quiet"]


@pytest.fixture(scope="module")
def train_reference(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """The uninterrupted run every train case ends equal to, trained once for them all, and
    how often it calls each kill point's function."""
    reference = tmp_path_factory.mktemp("train") / "reference"
    with pytest.MonkeyPatch.context() as patch:
        calls = count_calls(patch, lambda: cli(*TRAIN, "--out", reference), "step", "replace")
    return reference, calls


# SIGINT mid-epoch (an optimizer step), SIGKILL at a rename (last.pt, metrics.csv, ...); the
# resume test of test_training_resume.py covers SIGKILL between epochs
@pytest.mark.slow
@pytest.mark.parametrize(
    "sig, hook",
    [(signal.SIGINT, "step"), (signal.SIGKILL, "replace"), (signal.SIGTERM, "replace")],
    ids=["SIGINT", "SIGKILL", "SIGTERM"],
)
def test_train_interrupted_then_resumed_equals_an_uninterrupted_run(
    run_cli, tmp_path, train_reference, sig, hook
):
    args = TRAIN
    reference, calls = train_reference
    k = draw("train", sig, hook).randint(1, calls[hook])
    run = tmp_path / "run"
    done = interrupt(tmp_path, sig, hook, k, *args, "--out", run)
    assert_interrupted(done, sig)
    last = run / "last.pt"
    if sig != signal.SIGKILL:
        if last.exists():  # the note says how to go on
            assert f"cl-diag train --resume {last}" in " ".join(done.stderr.split())
        else:
            assert "nothing was kept" in done.stderr
        assert leftovers(run) == []  # the interrupted writer removed its temporary file
    if last.exists():  # resumed (a complete last.pt: there is nothing left to train)
        again = run_cli("train", "--resume", last, "--quiet")
    else:
        again = run_cli(*args, "--out", run)
    assert again.code == 0, again.err
    assert_same_run(reference, run)
    assert leftovers(run) == []


@pytest.mark.slow
def test_train_killed_at_its_last_write_resumes_to_the_same_files(
    run_cli, tmp_path, train_reference
):
    # the last rename of a run is its final metrics.csv, after the complete last.pt: a kill
    # there left the previous metrics.csv beside a complete checkpoint, and the resume, with no
    # epoch left to train, kept it; the resume now writes the history last.pt holds
    reference, calls = train_reference
    run = tmp_path / "run"
    done = interrupt(tmp_path, signal.SIGKILL, "replace", calls["replace"], *TRAIN, "--out", run)
    assert_interrupted(done, signal.SIGKILL)
    assert load_checkpoint(run / "last.pt")["complete"]
    again = run_cli("train", "--resume", run / "last.pt", "--quiet")
    assert again.code == 0, again.err
    assert_same_run(reference, run)
    assert leftovers(run) == []


# --------------------------------------------------------------------------- analyze


@pytest.fixture(scope="module")
def toy_checkpoint(tmp_path_factory) -> Path:
    from cl_diag.cli import main

    out = tmp_path_factory.mktemp("toy") / "run"
    with pytest.raises(SystemExit) as done:
        main(["train", str(TOY), "--steps", "10", "--out", str(out), "--quiet"])
    assert done.value.code in (0, None)
    return out / "last.pt"


@pytest.fixture(scope="module")
def analyze_reference(tmp_path_factory, toy_checkpoint) -> tuple[Path, int, Path]:
    """Made once for every analyze case: the uninterrupted analysis of ``toy_checkpoint`` they
    end equal to, how often it calls ``os.replace``, and the previous good output each case's
    ``--out`` starts as (an analysis of another checkpoint)."""
    root = tmp_path_factory.mktemp("analyze")
    reference = root / "reference"
    with pytest.MonkeyPatch.context() as patch:
        calls = count_calls(
            patch, lambda: cli("analyze", toy_checkpoint, "--out", reference, "-q"), "replace"
        )
    other = root / "other"
    cli("train", TOY, "--steps", "4", "--out", other, "--quiet")
    cli("analyze", other / "last.pt", "--out", root / "previous", "-q")
    return reference, calls["replace"], root / "previous"


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGKILL, signal.SIGTERM], ids=["SIGINT", "SIGKILL", "SIGTERM"]
)
def test_analyze_interrupted_then_rerun_equals_an_uninterrupted_run(
    run_cli, tmp_path, toy_checkpoint, analyze_reference, sig
):
    reference, calls, previous_output = analyze_reference
    out = tmp_path / "out"
    shutil.copytree(previous_output, out)  # the previous good output, as cl-diag wrote it
    previous = snapshot(out)

    k = draw("analyze", sig).randint(1, calls)
    done = interrupt(tmp_path, sig, "replace", k, "analyze", toy_checkpoint, "--out", out, "-q")
    assert_interrupted(done, sig)
    if sig != signal.SIGKILL:
        # nothing is moved after an interrupt: the previous output, or (stopped during the
        # moves) a folder whose every file is one run's or the other's, all listed as owned;
        # and no temporary file or staging folder is left, not even the listing's
        now = snapshot(out)
        assert set(now) == set(previous), (k, calls)
        assert leftovers(tmp_path) == [], (k, calls)
    again = run_cli("analyze", toy_checkpoint, "--out", out, "-q")
    assert again.code == 0, again.err
    assert snapshot(out) == snapshot(reference)
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------- sweep


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_sweep_interrupted_then_rerun_equals_an_uninterrupted_sweep(
    run_cli, monkeypatch, tmp_path, sig
):
    args = ["sweep", TOY, "--grid", "seed=1,2", "--steps", "8", "--quiet"]
    reference = tmp_path / "reference"

    def uninterrupted():
        assert run_cli(*args, "--out", reference).code == 0

    steps = count_calls(monkeypatch, uninterrupted, "step")["step"]
    assert steps == 16
    out = tmp_path / "out"
    k = draw("sweep", sig).randint(
        9, 15
    )  # during the second cell's training, its first cell complete
    done = interrupt(tmp_path, sig, "step", k, *args, "--out", out)
    assert_interrupted(done, sig)
    if sig == signal.SIGINT:
        assert "run the same command again to finish the sweep" in done.stderr
        assert "seed=1 done" in done.stdout and "seed=2 done" not in done.stdout
    assert not (out / "comparison").exists()  # no comparison of a sweep that did not finish

    again = run_cli(*args, "--out", out)
    assert again.code == 0, again.err
    # the first cell is skipped as complete; the interrupted one is trained to its end
    assert "skipped 1 complete cell(s): seed=1" in again.out
    # the interrupted child ran single-threaded: its parts record another fingerprint
    for cell in ("seed=1", "seed=2"):
        assert_same_run(reference / cell, out / cell)
        assert same_but_paths(
            out / cell / "analysis",
            reference / cell / "analysis",
            out,
            reference,
            fingerprints=True,
        )
    assert same_but_paths(
        out / "comparison", reference / "comparison", out, reference, fingerprints=True
    )
    assert leftovers(out) == []


def cell_processes(folder: Path) -> list[int]:
    """The ids of the sweep cell processes (``python -m cl_diag.orchestration.sweep``) that run
    in ``folder`` (their working folder), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            where = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"cl_diag.orchestration.sweep" in command and Path(where) == folder:
            found.append(int(entry.name))
    return found


#: the steps of a parallel sweep's toy cells: enough that both are still training when the
#: signal arrives. A toy step takes a few milliseconds once checkpoints are written every 50
#: steps rather than every epoch, so 200 steps could end in the moment between the cells'
#: first metrics.csv and the kill (a fresh machine's CI saw one cell complete).
PARALLEL_STEPS = "1000"


def start_parallel_sweep(tmp_path: Path, args: list) -> tuple[subprocess.Popen, Path]:
    """``cl-diag sweep ARGS --parallel 2`` in a child, returned once both cells have finished an
    epoch (their metrics.csv exist) and have hundreds to go."""
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-m", "cl_diag", *map(str, args), "--parallel", "2", "--out", out],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
        preexec_fn=default_signals,
    )
    started = [out / f"seed={seed}" / "metrics.csv" for seed in (1, 2)]
    deadline = time.monotonic() + 240
    while not all(p.exists() for p in started) and child.poll() is None:
        assert time.monotonic() < deadline, "the cells never started"
        time.sleep(0.05)
    return child, out


#: the parallel sweep the signal cases interrupt (each case adds ``--parallel 2``)
PARALLEL_SWEEP = ["sweep", TOY, "--grid", "seed=1,2", "--steps", PARALLEL_STEPS, "--quiet"]


@pytest.fixture(scope="module")
def parallel_sweep_reference(tmp_path_factory) -> Path:
    """The uninterrupted sweep every parallel case ends equal to, run once for them all."""
    reference = tmp_path_factory.mktemp("sweep") / "reference"
    cli(*PARALLEL_SWEEP, "--out", reference)
    return reference


#: a cell whose last.pt says complete and was written before this many seconds after the
#: signal may have been finishing its last step anyway: the test cannot tell, so it tries again
FINISHING = 1.0


def finished_before_the_signal(out: Path, sent: float) -> list[str]:
    """The cells of ``out`` that completed all their steps before the signal sent at ``sent``
    (``time.time()``) could reach them: the race the test lost when one cell finished while
    the other was still starting (its first metrics.csv is what the test waits for). A cell
    completed later than that trained on after the signal, which the test's asserts report."""
    found = []
    for seed in (1, 2):
        last = out / f"seed={seed}" / "last.pt"
        if load_checkpoint(last)["complete"] and last.stat().st_mtime < sent + FINISHING:
            found.append(f"seed={seed}")
    return found


def interrupted_parallel_sweep(tmp_path: Path, args: list, stop) -> Path:
    """Start ``args`` with ``--parallel 2``, check both cells run, ``stop(child, folder)`` it
    (sending the signal and waiting), and return the sweep's output folder; tried again in a
    fresh folder (at most 3 times) while a cell finished before the signal reached it."""
    for attempt in range(3):
        folder = tmp_path / f"attempt-{attempt}"
        folder.mkdir()
        child, out = start_parallel_sweep(folder, args)
        assert len(cell_processes(folder)) == 2
        sent = time.time()
        stop(child, folder)
        if not finished_before_the_signal(out, sent):
            return out
    raise AssertionError(
        f"in 3 attempts a cell finished its {PARALLEL_STEPS} steps before the signal; raise "
        "PARALLEL_STEPS"
    )


def finish_like_an_uninterrupted_sweep(run_cli, reference: Path, args: list, out: Path) -> None:
    again = run_cli(*args, "--out", out)
    assert again.code == 0, again.err
    for cell in ("seed=1", "seed=2"):
        assert_same_run(reference / cell, out / cell)
    assert same_but_paths(out / "comparison", reference / "comparison", out, reference)
    assert leftovers(out) == []


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc to find the cells")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_parallel_sweep_passes_its_signal_to_every_cell(
    run_cli, tmp_path, sig, parallel_sweep_reference
):
    """``--parallel 2``: the cells run in processes of their own; SIGINT or SIGTERM to the sweep
    alone (as ``kill`` or a scheduler sends it) reaches both, the sweep waits for them and exits
    130 or 143 without a comparison, no cell outlives it, and rerunning it finishes both cells
    as an uninterrupted sweep does (issues 11 and 26)."""
    args = PARALLEL_SWEEP

    def stop(child: subprocess.Popen, folder: Path) -> None:
        child.send_signal(sig)
        _, err = child.communicate(timeout=120)
        assert child.returncode == (143 if sig == signal.SIGTERM else 130), err[-3000:]
        assert "Traceback" not in err and "run the same command again" in err
        assert cell_processes(folder) == []  # waited for: none trains on

    out = interrupted_parallel_sweep(tmp_path, args, stop)
    assert not (out / "comparison").exists()
    for seed in (1, 2):
        assert not load_checkpoint(out / f"seed={seed}" / "last.pt")["complete"]
        log = (out / f"seed={seed}" / "sweep.log").read_text()
        assert "interrupted: the sweep resumes this cell" in log and "Traceback" not in log
    finish_like_an_uninterrupted_sweep(run_cli, parallel_sweep_reference, args, out)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc to find the cells")
def test_the_cells_of_a_killed_parallel_sweep_stop(run_cli, tmp_path, parallel_sweep_reference):
    """SIGKILL gives the sweep no chance to pass anything on (issue 26: its cells trained on for
    a minute); each cell notices its parent is gone and stops as on SIGTERM, keeping its
    last.pt, so the rerun finishes the sweep."""
    args = PARALLEL_SWEEP
    # what the cells wrote outside their logs (they share the killed sweep's stderr): shown
    # if a log lacks its line, as it once did on a loaded machine
    stderr: list[str] = []

    def stop(child: subprocess.Popen, folder: Path) -> None:
        child.send_signal(signal.SIGKILL)
        stderr.append(child.communicate(timeout=60)[1])
        deadline = time.monotonic() + 30
        while cell_processes(folder) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cell_processes(folder) == [], "a cell trained on after its sweep was killed"

    out = interrupted_parallel_sweep(tmp_path, args, stop)
    for seed in (1, 2):
        assert not load_checkpoint(out / f"seed={seed}" / "last.pt")["complete"]
        log = (out / f"seed={seed}" / "sweep.log").read_text()
        assert "interrupted: the sweep resumes this cell" in log, (log, stderr[-1])
    finish_like_an_uninterrupted_sweep(run_cli, parallel_sweep_reference, args, out)
