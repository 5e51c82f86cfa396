"""``sweep``: train then analyze every cell of a grid over training options, then compare them all
(:mod:`cl_diag.cli.sweep` is its command line).

A cell is one assignment of the grid's values, in ``OUT/<key=value_...>/`` with its run and
``analysis/``. Its options are built as ``cl-diag train`` builds a run's (defaults < recipe <
shared overrides < the cell's values, :func:`cl_diag.recipes.merge_layers`, then
:func:`~cl_diag.orchestration.train.resolve_config`), so a cell and a hand-made run with the
same options are the same run, and every cell is checked before the first trains. A cell with
``analysis/result.json`` is complete and skipped, one cut short resumes from ``last.pt``, and
a rerun with other options is refused, naming the option. Cells run here or, with
``parallel > 1``, in worker processes (:class:`_CellWorkers`), one GPU each where there are
GPUs (on CPUs set ``OMP_NUM_THREADS`` to each worker's share). The sweep ends with ``compare``
into ``OUT/comparison/``. ``equal_steps`` holds the optimiser steps of every cell (a
batch-size study otherwise holds the epochs); ``seed`` is a replicate axis.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cl_diag.errors import UserError
from cl_diag.options import SWEEP
from cl_diag.recipes import merge_layers, option_types, read_recipe
from cl_diag.vocabulary import RESULT_NAME

if TYPE_CHECKING:
    from cl_diag.orchestration.analyze import AnalyzeConfig
    from cl_diag.orchestration.train import TrainConfig
    from cl_diag.training.loop import FitProgress

#: Train options the sweep sets for each cell itself (its folder, its resume, no display), so a
#: grid may not vary them.
CELL_OWNED = frozenset({"out", "resume", "overwrite", "quiet"})


@dataclass(frozen=True)
class GridAxis:
    key: str  # option name with underscores, e.g. "batch_size"
    values: tuple[str, ...]

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


#: characters a grid value keeps in a cell's folder name; every other byte is written %XX
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.+@-")
#: longest cell folder name (file systems allow 255 bytes); longer ones end in a hash instead
_MAX_NAME = 200


def _escape(value: str) -> str:
    """A grid value as part of one path component: no separator, no '_' or '=' (which split
    a cell name into its key=value parts), nothing a shell or file system treats specially."""
    return "".join(
        chr(byte) if chr(byte) in _SAFE_CHARS else f"%{byte:02X}" for byte in value.encode()
    )


@dataclass(frozen=True)
class Cell:
    assignment: tuple[tuple[str, str], ...]  # ((key, value), ...) in grid order

    @property
    def name(self) -> str:
        """The cell's folder: ``key=value`` parts joined by ``_``, each value escaped (%XX) to
        a safe path component, so that no grid value can name a path outside ``--out``; a name
        longer than 200 characters is cut and ends in a hash of the whole assignment."""
        name = "_".join(
            f"{key.replace('_', '-')}={_escape(value)}" for key, value in self.assignment
        )
        if len(name) > _MAX_NAME:
            digest = hashlib.sha256(name.encode()).hexdigest()[:16]
            name = f"{name[: _MAX_NAME - 17]}~{digest}"
        return name


@dataclass
class SweepConfig:
    recipe: str | Path | None
    grid: list[str]
    out: Path
    overrides: dict[str, Any] = field(default_factory=dict)
    """Train options for every cell, as typed values (``--epochs 5`` -> ``{"epochs": 5}``);
    they override the recipe, and the grid overrides them."""
    analysis: dict[str, Any] = field(default_factory=dict)
    """AnalyzeConfig fields for every cell's analysis (a probe suite's), besides input and out."""
    parallel: int = 1
    equal_steps: int | None = None
    """Equal-steps mode: every cell trains this many optimiser steps, whatever its batch size,
    and warms up over the same steps (:func:`equal_steps_layer`); None holds the epochs."""
    probe: str | Path | None = None
    """The probe suite ``analysis`` was read from (``--probe``), recorded with its text in the
    comparison's provenance.json; the fields themselves are ``analysis``."""
    plan: Path | None = None
    """The study's plan (``--plan``, :mod:`cl_diag.io.plans`): read and checked before any run,
    recorded by the comparison."""
    compare: bool = True
    """Compare the cells into ``out/comparison`` at the end; False when the caller compares
    them together with the cells of other sweeps (:mod:`cl_diag.orchestration.tune`)."""

    def record(self) -> dict[str, Any]:
        """The sweep as run, for the comparison's provenance.json: the command line, the recipe
        and probe suite with their text (a recipe file may change later; its contents made the
        runs), the grid, the overrides, the analysis fields and equal-steps mode."""
        return {
            "command": self.command_line(),
            "recipe": None if self.recipe is None else str(self.recipe),
            "recipe_text": _file_text(self.recipe, "recipe"),
            "probe": None if self.probe is None else str(self.probe),
            "probe_text": _file_text(self.probe, "probe suite"),
            "grid": list(self.grid),
            "overrides": {k: _plain(v) for k, v in self.overrides.items()},
            "analysis": {k: _plain(v) for k, v in self.analysis.items()},
            "equal_steps": self.equal_steps,
            "parallel": self.parallel,
            "out": str(self.out),
        }

    def command_line(self) -> str:
        """The ``cl-diag sweep`` command that runs this sweep (the options in a fixed order)."""
        import shlex

        words = ["cl-diag", "sweep"]
        if self.recipe is not None:
            words.append(str(self.recipe))
        for spec in self.grid:
            words += ["--grid", spec]
        if self.equal_steps is not None:
            words += ["--equal-steps", str(self.equal_steps)]
        if self.probe is not None:
            words += ["--probe", str(self.probe)]
        if self.plan is not None:
            words += ["--plan", str(self.plan)]
        if self.parallel != 1:
            words += ["--parallel", str(self.parallel)]
        for key, value in self.overrides.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                words.append(flag if value else "--no-" + key.replace("_", "-"))
            elif value is not None:
                words += [flag, str(value)]
        words += ["--out", str(self.out)]
        return shlex.join(words)


def _plain(value: Any) -> Any:
    """A config value as JSON: paths as text, tuples as lists."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _file_text(value: str | Path | None, kind: str) -> str | None:
    """The text of the recipe (or probe suite) ``value`` names, a path or a bundled name."""
    from cl_diag.recipes import locate

    if value is None:
        return None
    return locate(value, kind).read_text(encoding="utf-8")


@dataclass
class SweepResult:
    out: Path
    cells: list[Cell]
    skipped: list[str]
    comparison: Path | None  # None: not compared (SweepConfig.compare)


@dataclass(frozen=True)
class _Plan:
    cell: Cell
    folder: Path
    options: TrainConfig
    trained_steps: int | None = None  # the step of a complete last.pt; None: still to train

    def complete(self) -> bool:
        """Trained to its end, and analysed from that very checkpoint (a result.json beside an
        interrupted or older last.pt is not the cell's result)."""
        if self.trained_steps is None:
            return False
        analysis = self.folder / "analysis" / RESULT_NAME
        if not analysis.is_file():
            return False
        from cl_diag.result import load  # the result model: only when a cell is checked

        try:
            source = load(analysis).source
        except UserError:  # damaged or of another schema: the cell is analysed again
            return False
        return bool(source.complete) and source.step == self.trained_steps


def parse_grid(specs: Sequence[str], train_options: Mapping[str, Any]) -> list[GridAxis]:
    """``["batch-size=16,32", "vrn=0,30"]`` -> axes; every key must be one of ``train_options``
    (``{option: type}``, the options a grid may vary)."""
    if not specs:
        raise UserError(
            "The grid is empty: give at least one --grid KEY=V1,V2 "
            "(e.g. --grid batch-size=16,32,64)."
        )
    axes: list[GridAxis] = []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if not sep or not key or not values:
            raise UserError(
                f"--grid {spec!r} is not KEY=V1,V2,...; e.g. --grid batch-size=16,32,64."
            )
        if key not in train_options:
            valid = ", ".join(sorted(k.replace("_", "-") for k in train_options))
            raise UserError(
                f"--grid {spec!r}: {key.replace('_', '-')!r} is not a recipe option. Valid keys: "
                f"{valid}."
            )
        if any(axis.key == key for axis in axes):
            raise UserError(
                f"--grid gives {key.replace('_', '-')!r} twice; list all its values in one --grid."
            )
        if len(set(values)) != len(values):
            raise UserError(f"--grid {spec!r} repeats a value.")
        if train_options[key] is bool:
            bad = [v for v in values if v.lower() not in ("true", "false")]
            if bad:
                raise UserError(
                    f"--grid {spec!r}: {key.replace('_', '-')} takes true or false, not {bad[0]!r}."
                )
        axes.append(GridAxis(key, values))
    return axes


def cells_of(axes: Sequence[GridAxis]) -> list[Cell]:
    return [
        Cell(tuple((axis.key, value) for axis, value in zip(axes, combo, strict=True)))
        for combo in itertools.product(*(axis.values for axis in axes))
    ]


def _typed(key: str, text: str, kind: Any) -> Any:
    """A grid value as its option's type: ``"16"`` -> 16 for ``--batch-size``."""
    flag = "--" + key.replace("_", "-")
    if kind is bool:
        return text.lower() == "true"  # parse_grid allowed only true and false
    for typ, noun in ((int, "an integer"), (float, "a number")):
        if kind is typ:
            try:
                return typ(text)
            except ValueError:
                raise UserError(f"{flag} {text!r} is not {noun}.") from None
    return text


#: the options equal-steps mode sets for every cell, which neither the grid nor --steps may set
EQUAL_STEPS_OWNED = ("steps", "epochs", "warmup_steps", "warmup_epochs")


def equal_steps_layer(steps: int, values: Mapping[str, Any]) -> dict[str, Any]:
    """The options of equal-steps mode: ``steps`` optimiser steps for every cell, and a warm-up of
    ``warmup_steps`` given, else the recipe's own warm-up fraction of its training,
    round(steps x warmup_epochs / epochs), so that no batch size spends more of its training
    warming up than another (epoch-based warm-up would: 3 epochs are 252 steps at batch 16 on
    digits and 30 at batch 128)."""
    if values.get("warmup_steps") is not None:
        warmup = int(values["warmup_steps"])
    else:
        warmup = round(steps * float(values["warmup_epochs"]) / int(values["epochs"]))
    return {"steps": steps, "warmup_steps": warmup}


def _check_equal_steps(config: SweepConfig, axes: Sequence[GridAxis]) -> None:
    if config.equal_steps is None:
        return
    SWEEP["equal_steps"].normalise(config.equal_steps)
    varied = [a.flag for a in axes if a.key in EQUAL_STEPS_OWNED]
    if varied:
        raise UserError(
            f"--equal-steps holds the steps and the warm-up of every cell; the grid cannot vary "
            f"{varied[0]}. Drop that --grid, or drop --equal-steps to hold the epochs instead."
        )
    if config.overrides.get("steps") is not None:
        raise UserError(
            "--equal-steps N sets every cell's steps; drop --steps (or drop --equal-steps)."
        )


def _plan(
    config: SweepConfig,
    recipe: Mapping[str, Any],
    cell: Cell,
    folder: Path,
    kinds: Mapping[str, Any],
) -> _Plan:
    """A cell's options, checked as ``train`` checks them; nothing is trained or written."""
    from cl_diag.orchestration.analyze import check_analysis
    from cl_diag.orchestration.train import TrainConfig, check_resume, resolve_config, train_options

    try:
        grid = {key: _typed(key, value, kinds[key]) for key, value in cell.assignment}
    except UserError as exc:
        raise UserError(f"Sweep cell {cell.name}: the train options are not valid: {exc}") from None
    last = folder / "last.pt"
    owned: dict[str, Any] = {"out": str(folder), "quiet": True}
    if last.exists():
        owned["resume"] = str(last)
    layers: list[Mapping[str, Any]] = [recipe, config.overrides]
    if config.equal_steps is not None:
        merged, _ = merge_layers(TrainConfig.defaults(), recipe, config.overrides, grid)
        layers.append(equal_steps_layer(config.equal_steps, merged))
    values, given = merge_layers(TrainConfig.defaults(), *layers, grid, owned)
    try:
        options = train_options(values, given)
        # A cell trained before (complete or not): the options of this sweep must be those it was
        # trained with, or its result -- skipped as complete -- would be reported under options
        # it never had.
        checkpoint = check_resume(resolve_config(options))
        check_analysis(_analysis(folder, config.analysis))
    except UserError as exc:
        raise UserError(
            f"Sweep cell {cell.name}: {exc} Nothing was trained; fix the --grid values or the "
            "options, or give another --out for a sweep with other options."
        ) from None
    trained = None
    if checkpoint is not None and checkpoint.get("complete") is True:
        trained = checkpoint.get("step")
    return _Plan(cell, folder, options, trained)


def _analysis(folder: Path, fields_: Mapping[str, Any]) -> AnalyzeConfig:
    from cl_diag.orchestration.analyze import AnalyzeConfig

    return AnalyzeConfig(input=folder / "last.pt", out=folder / "analysis", **fields_)


def _check_no_links(out: Path, folders: Sequence[str]) -> None:
    """Refuse a cell folder (or its analysis/, or comparison/) that is a symbolic link, or a file
    where the sweep makes a folder: everything a sweep writes stays under ``--out``, and a link
    there would carry a cell's training and analysis elsewhere."""
    for relative in folders:
        here = out
        for part in Path(relative).parts:
            here = here / part
            try:
                mode = os.lstat(here).st_mode
            except FileNotFoundError:
                break
            except OSError as exc:
                raise UserError(f"Cannot read {here}: {exc.strerror or exc}.") from None
            if stat.S_ISLNK(mode):
                raise UserError(
                    f"{here} is a symbolic link (to {os.readlink(here)}); a sweep writes only "
                    f"inside --out {out}, so it does not follow it. Remove the link (or give "
                    "another --out). Nothing was trained."
                )
            if not stat.S_ISDIR(mode):
                raise UserError(
                    f"{here} is a file where the sweep makes a folder. Move it, or give another "
                    "--out. Nothing was trained."
                )


# ------------------------------------------------------------------ cells in worker processes


def analysis_options_from_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON's lists and strings back into AnalyzeConfig's tuples and paths."""
    from cl_diag.orchestration.analyze import AnalyzeConfig

    config = AnalyzeConfig.from_record({"input": "", "out": "", **values})
    return {f.name: getattr(config, f.name) for f in fields(AnalyzeConfig) if f.name in values}


class _Children:
    """The cell processes running now (``parallel > 1``), so that an interrupt of the sweep
    reaches every one of them, and no new one starts after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._stopping = False

    def start(self, command: list[str], **kwargs: Any) -> subprocess.Popen | None:
        with self._lock:
            if self._stopping:
                return None
            child = subprocess.Popen(command, **kwargs)
            self._running.add(child)
            return child

    def finished(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(child)

    def interrupt(self, signum: int = signal.SIGINT) -> None:
        """``signum`` (SIGINT or SIGTERM, the signal the sweep got) to every running cell (each
        stops as Ctrl-C stops a train run, keeping its last.pt) and no new cell. The caller
        then waits for them to end."""
        with self._lock:
            self._stopping = True
            for child in self._running:
                with contextlib.suppress(OSError):
                    child.send_signal(signum)


class _CellWorkers:
    """The cell processes of a sweep with ``parallel > 1``: one long-lived process per slot
    (``python -m cl_diag.orchestration.sweep``) running cell after cell, so a cell does not pay
    for a fresh interpreter and its imports (about 4 CPU-seconds). A slot is one GPU where there
    are GPUs (:func:`_cell_gpu`). The sweep writes a cell's spec (one JSON line) to the worker's
    stdin; the worker trains and analyses it, logging to the cell's ``sweep.log``, and answers with
    the cell's exit status on a line of its stdout. A worker that ends instead of answering is read
    by its exit status, and a new one takes the slot's next cell.
    """

    def __init__(self, slots: int, children: _Children):
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in range(slots):
            self._free.put(slot)
        self._slots = slots
        self._running: dict[int, subprocess.Popen] = {}
        self._children = children

    def start(self, count: int) -> None:
        """Start the first ``count`` workers now, from the calling thread (the sweep's main
        thread: a worker is told of the end of the thread that started it, see
        :func:`cl_diag.io.signals.watch_parent`)."""
        for slot in range(min(count, self._slots)):
            self._worker(slot)

    def _worker(self, slot: int) -> subprocess.Popen:
        child = self._running.get(slot)
        if child is not None and child.poll() is None:
            return child
        env = dict(os.environ)
        gpu = _cell_gpu(slot)
        if gpu is not None:  # one device per slot
            env["CUDA_VISIBLE_DEVICES"] = gpu
        env[_PARENT_ENV] = str(os.getpid())  # the worker stops when this process is gone
        started = self._children.start(
            [sys.executable, "-m", "cl_diag.orchestration.sweep"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
        )
        if started is None:  # the sweep is being interrupted
            raise KeyboardInterrupt
        self._running[slot] = started
        return started

    def run(self, plan: _Plan, analysis: Mapping[str, Any]) -> None:
        """Train and analyse ``plan``'s cell in a free worker; KeyboardInterrupt if the cell
        was interrupted, UserError if it failed."""
        slot = self._free.get()
        try:
            self._run(slot, plan, analysis)
        finally:
            self._free.put(slot)

    def _run(self, slot: int, plan: _Plan, analysis: Mapping[str, Any]) -> None:
        log = plan.folder / "sweep.log"
        spec = json.dumps(
            {
                "train": plan.options.options(),
                "folder": str(plan.folder),
                "analysis": dict(analysis),
            },
            default=str,  # paths
        )
        child = self._worker(slot)
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(spec + "\n")
            child.stdin.flush()
            reply = child.stdout.readline().strip()
        except OSError:  # the worker is gone (a broken pipe)
            reply = ""
        if reply.lstrip("-").isdigit():
            code = int(reply)
        else:  # the worker ended during the cell
            code = child.wait()
            self._children.finished(child)
            del self._running[slot]
        if code in _INTERRUPTED:  # the cell was interrupted
            raise KeyboardInterrupt
        if code != 0:
            text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
            tail = text.strip().splitlines()[-3:]
            raise UserError(
                f"Sweep cell {plan.cell.name} failed (exit {code}); see {log}: {' | '.join(tail)}"
            )

    def close(self) -> None:
        """End the workers (end of their input) and wait for them."""
        for child in self._running.values():
            with contextlib.suppress(OSError):
                if child.stdin is not None:
                    child.stdin.close()
            child.wait()
            self._children.finished(child)
        self._running.clear()


def _cell_gpu(slot: int) -> str | None:
    """The GPU the cell running in ``slot`` is given (its ``CUDA_VISIBLE_DEVICES``): the
    visible GPUs in turn (those ``CUDA_VISIBLE_DEVICES`` lists, else every one), so slots
    beyond the number of GPUs share them. None without a GPU: a CPU cell's environment is
    left as it is, since the variable is part of the results' fingerprint."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [part.strip() for part in visible.split(",") if part.strip()]
        return listed[slot % len(listed)] if listed else None
    import torch

    count = torch.cuda.device_count()
    return str(slot % count) if count else None


#: the environment variable that gives a cell process the sweep's process id
_PARENT_ENV = "CL_DIAG_SWEEP_PARENT"
#: exit statuses of a cell that was interrupted (SIGINT or SIGTERM, handled or not)
_INTERRUPTED = frozenset({130, 143, -signal.SIGINT, -signal.SIGTERM})


def _cell_main() -> int:
    """A worker of :class:`_CellWorkers`: cell after cell (a spec per line of stdin), trained and
    analysed here with its output in the cell's sweep.log and its exit status answered on stdout.
    SIGINT and SIGTERM stop a cell as they stop ``cl-diag train`` (exit 130 or 143), and so does the
    end of the sweep's process, even by SIGKILL (:func:`cl_diag.io.signals.watch_parent`)."""
    from cl_diag.io.signals import exit_status, interrupts, watch_parent

    # the answers have stdout to themselves: anything else printed goes to stderr
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        with interrupts(sigint=True):
            parent = os.environ.get(_PARENT_ENV, "")
            if parent.isdigit():
                watch_parent(int(parent))
            while line := sys.stdin.readline():
                spec = json.loads(line)
                with _output_to(Path(spec["folder"]) / "sweep.log"):
                    try:
                        code = _cell_status(spec)
                    except KeyboardInterrupt:
                        print(
                            "interrupted: the sweep resumes this cell when run again",
                            file=sys.stderr,
                        )
                        raise
                answers.write(f"{code}\n")
                answers.flush()
        return 0
    except KeyboardInterrupt as exc:
        return exit_status(exc)


def _cell_status(spec: Mapping[str, Any]) -> int:
    """The exit status of the cell ``spec``, run in this worker with its output in its log.
    A crash is answered as a failed cell (1) with its traceback in the log the sweep's error
    names (raised, it went to the sweep's stderr once the log was closed, and that log stayed
    empty). An interrupt wrapped in another error is raised as the interrupt: a signal that
    came where Python wraps what is raised (a class body's ``__set_name__`` while matplotlib
    is imported gives a RuntimeError caused by it) stopped the cell, it did not crash it."""
    from cl_diag.io.atomic import in_chain

    try:
        return _run_cell(spec)
    except Exception as exc:
        interrupt = in_chain(exc, KeyboardInterrupt)
        if interrupt is not None:
            raise interrupt from None
        traceback.print_exc()
        return 1


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """This process's stdout and stderr (the file descriptors, so that what C code prints goes
    there too) appended to ``log`` within the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (target, *saved):
            os.close(fd)


def _run_cell(spec: Mapping[str, Any]) -> int:
    from cl_diag.orchestration.analyze import analyze
    from cl_diag.orchestration.train import TrainConfig, train

    folder = Path(spec["folder"])
    try:
        print(train(TrainConfig(**spec["train"])).summary(), flush=True)
        outcome = analyze(_analysis(folder, analysis_options_from_json(spec["analysis"])))
        print(f"report: {outcome.out / 'report.html'}", flush=True)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return UserError.exit_code
    return 0


# --------------------------------------------------------------------------- the sweep


def sweep(
    config: SweepConfig,
    on_progress: Callable[[str, int, int], None] | None = None,
    train_progress: Callable[[str], FitProgress] | None = None,
) -> SweepResult:
    """Run every cell of the grid (train, then analyze), skip complete ones, then compare them.

    ``on_progress(cell name, done, total)`` follows the cells (first with an empty name);
    ``train_progress(cell name)`` gives a progress callback for a cell trained in this process.
    """
    from cl_diag.io.output import ensure_writable_parent
    from cl_diag.orchestration.analyze import analyze
    from cl_diag.orchestration.compare import CompareConfig, compare, read_plan
    from cl_diag.orchestration.train import TrainConfig, train

    SWEEP["parallel"].normalise(config.parallel)
    study_plan = None if config.plan is None else read_plan(config.plan)  # a bad one stops here
    kinds = option_types(TrainConfig)
    # unknown keys and bad values fail here, before any work
    recipe = read_recipe(config.recipe, TrainConfig) if config.recipe is not None else {}
    axes = parse_grid(config.grid, {k: t for k, t in kinds.items() if k not in CELL_OWNED})
    _check_equal_steps(config, axes)
    cells = cells_of(axes)
    out = Path(config.out)
    ensure_writable_parent(out)
    _check_no_links(out, [f"{cell.name}/analysis" for cell in cells] + ["comparison"])
    plans = [_plan(config, recipe, cell, out / cell.name, kinds) for cell in cells]

    out.mkdir(parents=True, exist_ok=True)
    todo = [plan for plan in plans if not plan.complete()]
    skipped = [plan.cell.name for plan in plans if plan not in todo]
    done = len(skipped)
    if on_progress is not None:
        on_progress("", done, len(cells))

    children = _Children()
    workers = _CellWorkers(config.parallel, children)

    def run_cell(plan: _Plan) -> None:
        plan.folder.mkdir(parents=True, exist_ok=True)
        if config.parallel > 1:
            workers.run(plan, config.analysis)
            return
        display = train_progress(plan.cell.name) if train_progress is not None else None
        train(plan.options, progress=display)
        analyze(_analysis(plan.folder, config.analysis))

    if config.parallel == 1:
        for plan in todo:
            run_cell(plan)
            done += 1
            if on_progress is not None:
                on_progress(plan.cell.name, done, len(cells))
    else:
        pool = ThreadPoolExecutor(max_workers=config.parallel)
        try:
            workers.start(len(todo))
            futures = [pool.submit(run_cell, plan) for plan in todo]
            for plan, future in zip(todo, futures, strict=True):
                future.result()
                done += 1
                if on_progress is not None:
                    on_progress(plan.cell.name, done, len(cells))
        except KeyboardInterrupt as exc:
            # a signal to this process alone still stops every cell, with the same signal
            from cl_diag.io.signals import Terminated

            children.interrupt(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
            raise
        finally:
            # after a failure no further cell starts; the running ones end (or stop) first
            pool.shutdown(wait=True, cancel_futures=True)
            workers.close()

    if not config.compare:
        return SweepResult(out=out, cells=cells, skipped=skipped, comparison=None)
    inputs = [plan.folder / "analysis" for plan in plans]
    comparison = compare(
        CompareConfig(inputs=inputs, out=out / "comparison", sweep=config.record(), plan=study_plan)
    )
    return SweepResult(out=out, cells=cells, skipped=skipped, comparison=comparison.report_html)


if __name__ == "__main__":
    sys.exit(_cell_main())
