"""The CLI's one progress display: a rich bar on a terminal, plain lines otherwise (at most one
every few seconds per task), so that ``train``, ``analyze``, ``sweep`` and ``reproduce`` look
alike and ``--quiet`` or a pipe behave alike. The library below only calls back
(``progress=``); it never prints progress itself. :func:`counter` and :func:`plain_counter`
serve analyze, :class:`TrainDisplay` the training loop, :func:`run_cells` the many runs of a
sweep or a reproduction.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = [
    "PLAIN_EVERY",
    "TrainDisplay",
    "counter",
    "plain_counter",
    "progress_bar",
    "row_line",
    "run_cells",
    "train_display",
    "use_bar",
]

#: Seconds between two plain progress lines of one task (its first and last always print).
PLAIN_EVERY = 5.0

T = TypeVar("T")


def use_bar(quiet: bool) -> bool:
    """A bar only on a terminal and without ``--quiet``; plain output otherwise (logs, pipes)."""
    return not quiet and sys.stdout.isatty()


class _Details(ProgressColumn):
    """A task's ``details`` field, when it has one (analyze's tasks have none)."""

    def render(self, task: Task) -> Text:
        return Text(str(task.fields.get("details", "")))


def progress_bar(console: Console, *, transient: bool = False) -> Progress:
    """The one bar layout of the CLI; use it as a context manager and add tasks to it."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        _Details(),
        console=console,
        transient=transient,
    )


def counter(bar: Progress) -> Callable[[str, int | None], Callable[[int], None]]:
    """``progress(description, total)`` -> ``advance(n)``, each call a new task on ``bar``."""

    def factory(description: str, total: int | None) -> Callable[[int], None]:
        task = bar.add_task(description, total=total)
        return lambda n: bar.advance(task, n)

    return factory


def plain_counter(
    stream: TextIO | None = None,
    *,
    every: float = PLAIN_EVERY,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[str, int | None], Callable[[int], None]]:
    """``progress(description, total)`` -> ``advance(n)`` as plain lines on ``stream``
    (default: stderr, so stdout keeps the command's own output): a line when a task starts,
    then at most one every ``every`` seconds, and one when it is done, e.g.
    ``encoding the un-augmented train split (1,347 images): 512/1,347 (38 %, 210/s)``."""

    def factory(description: str, total: int | None) -> Callable[[int], None]:
        out = stream if stream is not None else sys.stderr
        start = last = clock()
        done = 0

        def say(line: str) -> None:
            print(line, file=out, flush=True)

        if total is None:
            say(f"{description} ...")
        else:
            say(f"{description}: 0/{total:,}")

        def advance(n: int) -> None:
            nonlocal done, last
            done += n
            now = clock()
            finished = total is None or done >= total
            if not finished and now - last < every:
                return
            last = now
            if total is None:
                say(f"{description}: done")
                return
            rate = done / (now - start) if now > start else 0.0
            percent = 100 * done / total if total else 100.0
            say(f"{description}: {done:,}/{total:,} ({percent:.0f} %, {rate:,.0f}/s)")

        return advance

    return factory


def _knn(row: dict[str, float]) -> str:
    """The online kNN top-1 of a row that has one (``train --online-knn``), as text."""
    return f"  kNN top-1 {row['knn_top1']:.2%}" if "knn_top1" in row else ""


def row_line(row: dict[str, float], epochs: int) -> str:
    """One metrics row as the plain line ``train --quiet`` prints."""
    return (
        f"epoch {row['epoch']}/{epochs}  step {row['step']}  loss {row['loss']:.4f}  "
        f"vrn {row['vrn']:.4g}  lr {row['lr']:.4g}  {row['images_per_s']:.0f} img/s" + _knn(row)
    )


class TrainDisplay:
    """The training loop's progress callback: a task on ``bar``, or plain lines without a bar.

    The bar advances every step and shows the latest metrics row (loss, VRN, lr, images/s),
    which the loop produces every ``--log-every`` steps; plain mode prints one line per row.
    ``label`` prefixes the task (a sweep cell's name).
    """

    def __init__(self, bar: Progress | None = None, label: str = "") -> None:
        self.bar, self.label = bar, label
        self.task: TaskID | None = None  # set by start() when there is a bar
        self.epochs = 0

    def _describe(self, epoch: int) -> str:
        return f"{self.label + ' ' if self.label else ''}epoch {epoch}/{self.epochs}"

    def start(self, *, total_steps: int, done_steps: int, epochs: int) -> None:
        self.epochs = epochs
        if self.bar is not None:
            self.task = self.bar.add_task(
                self._describe(0), total=total_steps, completed=done_steps, details=""
            )

    def step(self, step: int, epoch: int) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=step, description=self._describe(epoch))

    def row(self, row: dict[str, float]) -> None:
        if self.bar is not None and self.task is not None:
            details = (
                f"loss {row['loss']:.4f}  vrn {row['vrn']:.4g}  lr {row['lr']:.3g}  "
                f"{row['images_per_s']:.0f} img/s" + _knn(row)
            )
            self.bar.update(self.task, details=details)
        elif self.bar is None:
            print(row_line(row, self.epochs), flush=True)

    def finish(self) -> None:
        """Take the task off a shared bar (a sweep cell is done)."""
        if self.bar is not None and self.task is not None:
            self.bar.remove_task(self.task)
            self.task = None


@contextmanager
def train_display(console: Console, *, quiet: bool) -> Iterator[TrainDisplay]:
    """The display of ``cl-diag train``: its own bar on a terminal, plain lines otherwise."""
    if not use_bar(quiet):
        yield TrainDisplay()
        return
    with progress_bar(console) as bar:
        yield TrainDisplay(bar)


def run_cells(work: Callable[..., T], console: Console, quiet: bool, *, what: str = "sweep") -> T:
    """Call ``work(on_progress=..., train_progress=...)`` (a sweep or a reproduction of many
    runs) with its display: on a terminal one bar over the runs, named ``what``, and a bar per
    run's training; otherwise one plain line per run done."""
    if use_bar(quiet):
        with progress_bar(console) as bar:
            task = bar.add_task(what, total=None, details="")
            cells: list[TrainDisplay] = []

            def report(name: str, done: int, total: int) -> None:
                for display in cells:  # the finished run's training bar goes
                    display.finish()
                cells.clear()
                bar.update(task, completed=done, total=total, details=name)

            def display(name: str) -> TrainDisplay:
                cells.append(TrainDisplay(bar, label=name))
                return cells[-1]

            return work(on_progress=report, train_progress=display)

    def plain(name: str, done: int, total: int) -> None:
        if name:
            console.print(f"[{done}/{total}] {name} done", highlight=False, markup=False)

    # one line per run, no training rows: a run's rows are in its metrics.csv, and a
    # free-embedding run of 2,000 one-step epochs would print 2,000 of them (issue 37)
    return work(on_progress=plain, train_progress=None)
