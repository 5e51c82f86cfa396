"""``sweep``: train then analyze every cell of a grid over recipe keys, then compare them all.

A cell is one assignment of the grid's values; it lives in ``OUT/<key=value_...>/`` with the
training run (``last.pt``, ``metrics.csv``) and its ``analysis/``. A cell whose
``analysis/result.json`` exists is complete and skipped, and a cell whose training was cut short
is resumed from its ``last.pt``, so re-running an interrupted sweep finishes it. Every cell runs
the ``train`` and ``analyze`` commands with exactly the arguments a user would type, so a sweep
cell and a hand-made run are the same thing. The sweep ends with ``compare`` over all cells into
``OUT/comparison/``.
"""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError
from cl_diag.recipes import read_recipe

#: train options a grid may not vary: the sweep owns where and how each cell runs.
RESERVED_KEYS = frozenset({"out", "resume", "overwrite", "quiet", "recipe_name"})


@dataclass(frozen=True)
class GridAxis:
    key: str  # option name with underscores, e.g. "batch_size"
    values: tuple[str, ...]

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


@dataclass(frozen=True)
class Cell:
    assignment: tuple[tuple[str, str], ...]  # ((key, value), ...) in grid order

    @property
    def name(self) -> str:
        return "_".join(f"{key.replace('_', '-')}={value}" for key, value in self.assignment)


@dataclass
class SweepConfig:
    recipe: str | Path | None
    grid: list[str]
    out: Path
    train_args: list[str] = field(default_factory=list)
    """Options after the recipe (e.g. ``--epochs 5``): they override it for every cell."""
    probe: str | Path | None = None
    """Probe suite for each cell's analysis: a path (probes/*.toml) or a bundled name."""
    parallel: int = 1
    quiet: bool = False


@dataclass
class SweepResult:
    out: Path
    cells: list[Cell]
    skipped: list[str]
    comparison: Path


def _train_command() -> Any:
    import typer

    from cl_diag.cli import app

    group = typer.main.get_command(app)
    return group.commands["train"]


def parse_grid(specs: Sequence[str], train_options: dict[str, type]) -> list[GridAxis]:
    """``["batch-size=16,32", "vrn=0,30"]`` -> axes; every key must be a train option."""
    if not specs:
        raise UserError("The grid is empty: give at least one --grid KEY=V1,V2 (e.g. --grid batch-size=16,32,64).")
    axes: list[GridAxis] = []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if not sep or not key or not values:
            raise UserError(f"--grid {spec!r} is not KEY=V1,V2,...; e.g. --grid batch-size=16,32,64.")
        if key in RESERVED_KEYS or key not in train_options:
            valid = ", ".join(sorted(k.replace("_", "-") for k in train_options if k not in RESERVED_KEYS))
            raise UserError(f"--grid {spec!r}: {key.replace('_', '-')!r} is not a recipe option. Valid keys: {valid}.")
        if any(axis.key == key for axis in axes):
            raise UserError(f"--grid gives {key.replace('_', '-')!r} twice; list all its values in one --grid.")
        if len(set(values)) != len(values):
            raise UserError(f"--grid {spec!r} repeats a value.")
        if train_options[key] is bool:
            bad = [v for v in values if v.lower() not in ("true", "false")]
            if bad:
                raise UserError(f"--grid {spec!r}: {key.replace('_', '-')} takes true or false, not {bad[0]!r}.")
        axes.append(GridAxis(key, values))
    return axes


def cells_of(axes: Sequence[GridAxis]) -> list[Cell]:
    return [
        Cell(tuple((axis.key, value) for axis, value in zip(axes, combo)))
        for combo in itertools.product(*(axis.values for axis in axes))
    ]


def _cell_train_args(config: SweepConfig, cell: Cell, train_options: dict[str, type], cell_dir: Path) -> list[str]:
    args = [str(config.recipe)] if config.recipe is not None else []
    args += list(config.train_args)
    for key, value in cell.assignment:  # after the shared overrides, so the grid wins
        flag = "--" + key.replace("_", "-")
        if train_options[key] is bool:
            args.append(flag if value.lower() == "true" else "--no-" + key.replace("_", "-"))
        else:
            args += [flag, value]
    last = cell_dir / "last.pt"
    if last.exists():
        args += ["--resume", str(last)]
    args += ["--out", str(cell_dir), "--quiet"]
    return args


def _cell_analyze_args(config: SweepConfig, cell_dir: Path) -> list[str]:
    args = [str(cell_dir / "last.pt"), "--out", str(cell_dir / "analysis"), "--quiet"]
    if config.probe is not None:
        args += ["--probe", str(config.probe)]
    return args


def _click_errors() -> tuple[type[Exception], ...]:
    # Typer >= 0.2x parses with its own vendored copy of click, whose ClickException is not
    # click.ClickException: catch both, or a bad value escapes as typer's usage screen.
    errors: list[type[Exception]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            errors.append(importlib.import_module(module).ClickException)
        except ImportError:
            pass
    return tuple(errors)


def _check_train_args(command: Any, args: list[str], cell: str) -> None:
    """Parse and range-check a cell's train arguments without running, so a bad cell fails before any training."""
    from cl_diag.orchestration.train import TrainConfig, _check_resume, resolve_config
    from cl_diag.training.checkpoint import load_checkpoint
    from cl_diag.recipes import merge_recipe

    try:
        ctx = command.make_context("train", list(args), resilient_parsing=False)
    except _click_errors() as exc:
        raise UserError(f"Sweep cell {cell}: the train options are not valid: {exc.format_message()}") from None
    recipe = ctx.params.get("recipe")
    values, given = merge_recipe(ctx, read_recipe(recipe, command) if recipe is not None else {})
    names = TrainConfig.option_names()
    resume = values.get("resume")
    try:
        if resume:
            # A cell trained before (complete or not): the options of this sweep must be those it was
            # trained with, or its result -- skipped as complete -- would be reported under options it never had.
            overrides = {k: values[k] for k in given if k in names and k != "resume"}
            config = resolve_config(TrainConfig.from_checkpoint(resume, **overrides))
            _check_resume(config, load_checkpoint(resume)["config"], resume)
        else:
            resolve_config(TrainConfig(**{k: values[k] for k in names}))
    except UserError as exc:
        raise UserError(
            f"Sweep cell {cell}: {exc} Nothing was trained; fix the --grid values or the options, "
            "or give another --out for a sweep with other options."
        ) from None


def _run_inprocess(argv: list[str]) -> None:
    import typer

    from cl_diag.cli import app

    group = typer.main.get_command(app)
    try:
        group.main(argv, prog_name="cl-diag", standalone_mode=False)
    except _click_errors() as exc:
        raise UserError(f"cl-diag {' '.join(argv[:1])} failed: {exc.format_message()}") from None


def _run_subprocess(argv: list[str], device_index: int, log: Path) -> None:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = str(device_index)  # one device per concurrent cell
    with open(log, "a", encoding="utf-8") as stream:
        code = subprocess.call([sys.executable, "-m", "cl_diag", *argv], env=env, stdout=stream, stderr=stream)
    if code != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        raise UserError(f"cl-diag {argv[0]} failed for a sweep cell (exit {code}); see {log}: {' | '.join(tail)}")


def sweep(config: SweepConfig, on_progress: Callable[[str, int, int], None] | None = None) -> SweepResult:
    """Run every cell of the grid (train, then analyze), skip complete ones, then compare them."""
    from cl_diag.io.output import ensure_writable_parent
    from cl_diag.orchestration.compare import CompareConfig, compare
    from cl_diag.recipes import option_types

    if config.parallel < 1:
        raise UserError(f"--parallel must be at least 1 (got {config.parallel}).")
    command = _train_command()
    train_options = option_types(command)
    if config.recipe is not None:
        read_recipe(config.recipe, command)  # unknown keys and bad values fail here, before any work
    axes = parse_grid(config.grid, train_options)
    cells = cells_of(axes)
    out = Path(config.out)
    ensure_writable_parent(out)
    plans = []
    for cell in cells:
        cell_dir = out / cell.name
        train_args = _cell_train_args(config, cell, train_options, cell_dir)
        _check_train_args(command, train_args, cell.name)
        plans.append((cell, cell_dir, train_args))

    out.mkdir(parents=True, exist_ok=True)
    todo = [plan for plan in plans if not (plan[1] / "analysis" / "result.json").is_file()]
    skipped = [plan[0].name for plan in plans if plan not in todo]
    done = len(skipped)
    if on_progress is not None:
        on_progress("", done, len(cells))

    def run_cell(plan, slot: int) -> None:
        cell, cell_dir, train_args = plan
        cell_dir.mkdir(parents=True, exist_ok=True)
        if config.parallel == 1:
            _run_inprocess(["train", *train_args])
            _run_inprocess(["analyze", *_cell_analyze_args(config, cell_dir)])
        else:
            log = cell_dir / "sweep.log"
            _run_subprocess(["train", *train_args], slot, log)
            _run_subprocess(["analyze", *_cell_analyze_args(config, cell_dir)], slot, log)

    if config.parallel == 1:
        for plan in todo:
            run_cell(plan, 0)
            done += 1
            if on_progress is not None:
                on_progress(plan[0].name, done, len(cells))
    else:
        with ThreadPoolExecutor(max_workers=config.parallel) as pool:
            futures = [pool.submit(run_cell, plan, i % config.parallel) for i, plan in enumerate(todo)]
            for plan, future in zip(todo, futures):
                future.result()
                done += 1
                if on_progress is not None:
                    on_progress(plan[0].name, done, len(cells))

    comparison = compare(CompareConfig(inputs=[cell_dir / "analysis" for _, cell_dir, _ in plans], out=out / "comparison"))
    return SweepResult(out=out, cells=cells, skipped=skipped, comparison=comparison.report_html)
