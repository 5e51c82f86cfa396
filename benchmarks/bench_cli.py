"""How long the command line takes where nothing is computed: help, and argument errors.

``cl-diag --help``, every ``cl-diag COMMAND --help`` and argument errors that need no data
(a value out of bounds, an unknown option) should come back at once (issue 25: under 0.5 s and
100 MiB on 2 cores): the heavy modules (torch, pandas, scipy, matplotlib, scikit-learn) load
only inside the commands that compute. This times each such command line as a fresh process,
paired against the interpreter alone (``python -c pass``) and against ``python -c "import
torch"`` (what every command paid before the lazy imports), in the same rounds: each round
runs every command line once, in a seeded shuffled order, so that a load that comes and goes
on a shared machine falls on all of them alike. It prints per command line the median wall
time, its median ratio to ``python -c pass`` (and to ``import torch``) over the rounds, and
the largest peak resident memory of its process (``ru_maxrss`` from ``wait4``).

Run:  python benchmarks/bench_cli.py [--rounds 7] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _cl_diag() -> list[str]:
    """The console script beside this interpreter (what a user types), else ``-m cl_diag``."""
    script = Path(sys.executable).with_name("cl-diag")
    if script.is_file():
        return [str(script)]
    found = shutil.which("cl-diag")
    return [found] if found else [sys.executable, "-m", "cl_diag"]


#: the children's environment: this one, but bytecode is written (and then read), as it is for
#: an installed package (pip compiles it); with PYTHONDONTWRITEBYTECODE set, every run would
#: compile cl_diag's sources again (about 0.1 s of a command line's time)
_ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one fresh process
    running ``argv``."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENVIRONMENT
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cli = _cl_diag()
    lines = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
        "cl-diag --help": [*cli, "--help"],
        **{
            f"cl-diag {name} --help": [*cli, name, "--help"]
            for name in ("analyze", "train", "compare", "sweep", "synth", "reproduce", "recipes")
        },
        "cl-diag train --batch-size 0": [*cli, "train", "--batch-size", "0"],
        "cl-diag train --views 100000": [*cli, "train", "--views", "100000"],
        "cl-diag analyze x.npz --num-pairs 0": [*cli, "analyze", "x.npz", "--num-pairs", "0"],
        "cl-diag train --bogus": [*cli, "train", "--bogus"],
    }
    order = random.Random(args.seed)
    times: dict[str, list[float]] = {name: [] for name in lines}
    cpu: dict[str, list[float]] = {name: [] for name in lines}
    memory: dict[str, float] = dict.fromkeys(lines, 0.0)
    ratios: dict[str, list[float]] = {name: [] for name in lines}
    ratios_torch: dict[str, list[float]] = {name: [] for name in lines}
    load_before = os.getloadavg()
    for name in lines:  # one warm-up round: files in the page cache, .pyc written
        _run(lines[name])
    for _ in range(args.rounds):
        names = list(lines)
        order.shuffle(names)
        this: dict[str, float] = {}
        for name in names:
            seconds, cpu_seconds, mib = _run(lines[name])
            this[name] = seconds
            times[name].append(seconds)
            cpu[name].append(cpu_seconds)
            memory[name] = max(memory[name], mib)
        for name in lines:
            ratios[name].append(this[name] / this["python -c pass"])
            ratios_torch[name].append(this[name] / this['python -c "import torch"'])

    loads = " -> ".join(
        " ".join(f"{x:.2f}" for x in load) for load in (load_before, os.getloadavg())
    )
    print(f"{args.rounds} rounds, {os.cpu_count()} CPU(s), load averages {loads}")
    print(
        f"{'command line':<38} {'median s':>9} {'x pass':>8} {'x torch':>8} {'CPU s':>7}"
        f" {'peak MiB':>9}"
    )
    for name in lines:
        seconds, ratio = statistics.median(times[name]), statistics.median(ratios[name])
        ratio_torch = statistics.median(ratios_torch[name])
        cpu_seconds = statistics.median(cpu[name])
        print(
            f"{name:<38} {seconds:>9.3f} {ratio:>8.2f} {ratio_torch:>8.2f} {cpu_seconds:>7.3f}"
            f" {memory[name]:>9.0f}"
        )


if __name__ == "__main__":
    main()
