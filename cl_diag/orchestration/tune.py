"""Choosing the VRN weight λ on a validation split, then testing it on fresh seeds.

The rebuttal's protocol (Lee et al., ICML 2025): VRN's accuracy gains appear after tuning λ
over {0.1, 0.3, 1, 3, 10, 30, 100}. Done without touching the test split
(``tools/select_vrn.py`` is the command line): a **tuning sweep** over the grid and λ = 0,
each run analysed with ``--validation-fraction``; **selection** (:func:`select_vrn`): at each
setting the λ > 0 with the highest mean validation top-1 (ties: the smaller); a **test
stage** (:func:`run_test_stage`) on fresh seeds at λ = 0 and λ*, each run recording how its λ
was chosen (``vrn_tuning``), so that the selection's luck (the winner's curse) stays out of
the test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError
from cl_diag.io.jsonfile import parse_json
from cl_diag.report.probe_section import validation_top1
from cl_diag.result import RESULT_NAME, Result, load
from cl_diag.runconfig import (
    MIN_TUNING_GRID,
    RunConfig,
    lambda_grid_text,
)

__all__ = [
    "CRITERION",
    "SPLIT",
    "LambdaScore",
    "Setting",
    "VrnSelection",
    "check_test_seeds",
    "load_tuning",
    "run_test_stage",
    "select_vrn",
]

#: the split λ is chosen on, as the test runs record it
SPLIT = "validation"
#: what λ is chosen by, as the test runs record it
CRITERION = "highest linear top-1 on the validation split, mean over the tuning seeds"
#: the options a setting is not told apart by: the weight chosen, the replicate, the record
_NOT_SETTING = ("vrn", "seed", "vrn_tuning")


@dataclass(frozen=True)
class LambdaScore:
    """One λ at one setting: the validation top-1 (a fraction) of each tuning seed."""

    weight: float
    seeds: tuple[int, ...]
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / len(self.values)

    @property
    def sd(self) -> float | None:
        """The sample standard deviation over seeds (None for one seed)."""
        n = len(self.values)
        if n < 2:
            return None
        m = self.mean
        return math.sqrt(math.fsum((v - m) ** 2 for v in self.values) / (n - 1))


@dataclass(frozen=True)
class Setting:
    """The tuning runs of one setting (their configs equal but for λ and the seed): the
    options that tell it apart from the other settings (``values``), the score of each λ,
    and the chosen λ*."""

    values: tuple[tuple[str, Any], ...]
    scores: tuple[LambdaScore, ...]
    selected: float

    @property
    def grid(self) -> tuple[float, ...]:
        """The VRN weights chosen from (λ > 0), ascending."""
        return tuple(s.weight for s in self.scores if s.weight > 0)

    @property
    def label(self) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.values) or "all runs"

    def record(self) -> dict[str, Any]:
        return {
            "setting": dict(self.values),
            "grid": list(self.grid),
            "selected": self.selected,
            "split": SPLIT,
            "criterion": CRITERION,
            "scores": [
                {
                    "vrn": s.weight,
                    "seeds": list(s.seeds),
                    "validation_top1": list(s.values),
                    "mean": s.mean,
                    "sd": s.sd,
                }
                for s in self.scores
            ],
        }


@dataclass(frozen=True)
class VrnSelection:
    settings: tuple[Setting, ...]
    fraction: float | None = None
    runs: int = 0
    notes: tuple[str, ...] = field(default=())

    def record(self) -> dict[str, Any]:
        return {
            "schema": "cl-diag/vrn-selection/1",
            "validation_fraction": self.fraction,
            "tuning_runs": self.runs,
            "settings": [s.record() for s in self.settings],
        }

    def json_text(self) -> str:
        return json.dumps(self.record(), indent=2, sort_keys=False) + "\n"

    def markdown(self) -> str:
        """The selection as a Markdown table per setting: λ, validation top-1 mean ± sd (n),
        λ* marked."""
        lines = [
            "# VRN weight chosen on the validation split",
            "",
            f"Validation split: {_pct(self.fraction)} of each class of the train split, carved "
            "by `cl-diag analyze --validation-fraction`; the linear probe fitted on the rest. "
            f"Criterion: {CRITERION} (ties: the smaller λ); λ = 0 (no VRN) is shown, never "
            "chosen.",
            "",
        ]
        for setting in self.settings:
            lines += [
                f"## {setting.label}: λ* = {setting.selected:g}",
                "",
                "| λ | validation linear top-1 (%) | seeds |",
                "|---|---|---|",
            ]
            for s in setting.scores:
                mark = " **λ\\***" if s.weight == setting.selected else ""
                sd = "" if s.sd is None else f" ± {100 * s.sd:.2f}"
                lines.append(
                    f"| {s.weight:g}{mark} | {100 * s.mean:.2f}{sd} | "
                    f"{', '.join(str(k) for k in s.seeds)} |"
                )
            lines.append("")
        return "\n".join(lines)


def _pct(fraction: float | None) -> str:
    return "?" if fraction is None else f"{100 * fraction:g} %"


def load_tuning(folder: Path) -> list[tuple[str, Result]]:
    """The analysed runs of a tuning sweep: every ``<cell>/analysis/result.json`` of
    ``folder`` (a ``cl-diag sweep --out`` folder), in name order."""
    folder = Path(folder)
    files = sorted(folder.glob(f"*/analysis/{RESULT_NAME}"))
    if not files:
        raise UserError(
            f"{folder} holds no <cell>/analysis/{RESULT_NAME}: give the --out folder of the "
            "tuning sweep (cl-diag sweep ... --probe a suite with validation-fraction)."
        )
    return [(str(f.parent.parent.name), load(f)) for f in files]


def _validation_top1(name: str, result: Result) -> float:
    top1 = validation_top1(result.probes)
    if top1 is None:
        raise UserError(
            f"{name} has no validation accuracy: analyse the tuning runs with a validation "
            "split (cl-diag analyze --validation-fraction 0.2, or validation-fraction in the "
            "probe suite) so that λ is never chosen on the test split."
        )
    return float(top1)


def select_vrn(runs: Sequence[tuple[str, Result]]) -> VrnSelection:
    """λ* at each setting of the tuning ``runs``: the VRN weight λ > 0 with the highest
    validation linear top-1 averaged over the seeds (ties: the smaller). A setting (runs agreeing
    on every option but ``vrn``, the seed and a tuning record) needs :data:`MIN_TUNING_GRID`
    weights λ > 0, the same seeds at every λ and a validation accuracy for every run; a
    UserError names what is missing."""
    groups: dict[tuple, list[tuple[str, RunConfig, float]]] = {}
    fractions = set()
    for name, result in runs:
        config = RunConfig.of(result)
        if config.vrn.weight is None:
            raise UserError(f"{name} records VRN on without its weight: λ cannot be chosen.")
        top1 = _validation_top1(name, result)
        validation = result.probes.validation if result.probes is not None else None
        if validation is not None:
            fractions.add(validation.fraction)
        groups.setdefault(config.without(_NOT_SETTING), []).append((name, config, top1))
    if len(fractions) > 1:
        raise UserError(
            "The tuning runs were validated on splits of different sizes "
            f"({', '.join(sorted(map(str, fractions)))}): analyse them all with one "
            "--validation-fraction."
        )
    varied = _varied_options([config for group in groups.values() for _, config, _ in group])
    settings = []
    for group in groups.values():
        by_weight: dict[float, dict[int, float]] = {}
        for name, config, top1 in group:
            seed = config.seed if config.seed is not None else 0
            weight = float(config.vrn.weight or 0.0)
            seeds = by_weight.setdefault(weight, {})
            if seed in seeds:
                raise UserError(
                    f"{name}: two tuning runs at λ = {weight:g} with seed {seed} and equal "
                    "options; each λ takes each seed once."
                )
            seeds[seed] = top1
        seed_sets = {tuple(sorted(s)) for s in by_weight.values()}
        values = tuple((k, group[0][1].option(k)) for k in varied)
        label = ", ".join(f"{k} {v}" for k, v in values) or "the runs"
        if len(seed_sets) != 1:
            raise UserError(
                f"At {label} the λ values have different seeds ({sorted(seed_sets)}): give every "
                "λ the same seeds, so their means compare like with like."
            )
        scores = tuple(
            LambdaScore(w, tuple(sorted(s)), tuple(s[k] for k in sorted(s)))
            for w, s in sorted(by_weight.items())
        )
        grid = [s for s in scores if s.weight > 0]
        if len(grid) < MIN_TUNING_GRID:
            raise UserError(
                f"At {label} the tuning runs try {len(grid)} VRN weight(s) λ > 0; choosing λ "
                f"needs at least {MIN_TUNING_GRID} (the rebuttal's grid has 7)."
            )
        # highest mean; on a tie the smaller λ (grid ascending, strict '>')
        best = grid[0]
        for score in grid[1:]:
            if score.mean > best.mean:
                best = score
        settings.append(Setting(values, scores, best.weight))
    settings.sort(key=lambda s: [(k, _sort_value(v)) for k, v in s.values])
    fraction = next(iter(fractions)) if fractions else None
    return VrnSelection(tuple(settings), fraction, len(runs))


def _sort_value(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def _varied_options(configs: Sequence[RunConfig]) -> list[str]:
    """The options, other than λ, the seed and a tuning record, on which the configs differ:
    what tells the settings apart (e.g. ``batch_size``)."""
    keys: list[str] = []
    for config in configs:
        keys += [k for k in config.options if k not in keys]
    skip = tuple(f"{k}." for k in _NOT_SETTING)
    return [
        k
        for k in keys
        if k not in _NOT_SETTING
        and not k.startswith(skip)
        and len({repr(c.option(k)) for c in configs}) > 1
    ]


def _sweep_record(folder: Path) -> dict[str, Any]:
    """The sweep that made a tuning folder, from its comparison's provenance.json."""
    from cl_diag.orchestration.compare import PROVENANCE_NAME

    path = Path(folder) / "comparison" / PROVENANCE_NAME
    try:
        read = parse_json(path.read_text(encoding="utf-8"), where=path, fix="")
        record = read.get("sweep") if isinstance(read, dict) else None
    except (OSError, ValueError, UserError):
        record = None
    if not isinstance(record, dict):
        raise UserError(
            f"{path} does not record the sweep that made {folder}: run the test stage from the "
            "--out folder of a finished cl-diag sweep."
        )
    return record


def check_test_seeds(selection: VrnSelection, seeds: Sequence[int]) -> None:
    """Refuse (:class:`UserError`) test seeds that are missing or trained a tuning run: the
    test stage takes fresh seeds, else λ* is tested on the noise it was chosen on."""
    tuning_seeds = {k for s in selection.settings for score in s.scores for k in score.seeds}
    reused = sorted(tuning_seeds & set(seeds))
    if reused:
        raise UserError(
            f"Seed(s) {', '.join(map(str, reused))} trained the tuning runs; the test stage "
            "takes fresh seeds (else λ* is tested on the noise it was chosen on)."
        )
    if not seeds:
        raise UserError("Give the test stage's seeds, e.g. --test-seeds 6,7,8,9,10.")


def run_test_stage(
    tuning: Path,
    selection: VrnSelection,
    seeds: Sequence[int],
    out: Path,
    *,
    parallel: int = 1,
    on_sweep=None,
) -> Path:
    """Train and analyse, on fresh ``seeds``, λ = 0 and each setting's λ* (recording its tuning)
    with the tuning sweep's recipe, overrides, equal steps and probe suite into ``out/test/``,
    then compare them all into ``out/comparison/``; returns that report (HTML). ``parallel``
    changes how long the stage takes, not its results."""
    from cl_diag.orchestration.compare import CompareConfig, compare
    from cl_diag.orchestration.sweep import SweepConfig, analysis_options_from_json, sweep

    record = _sweep_record(tuning)
    check_test_seeds(selection, seeds)
    seed_axis = "seed=" + ",".join(str(s) for s in seeds)
    overrides = dict(record.get("overrides") or {})
    common: dict[str, Any] = {
        "recipe": record.get("recipe"),
        "out": Path(out) / "test",
        "compare": False,
        # JSON's lists back into the analysis options' tuples
        "analysis": analysis_options_from_json(record.get("analysis") or {}),
        "equal_steps": record.get("equal_steps"),
        "probe": record.get("probe"),
        "parallel": parallel,
    }

    def axes(setting: Setting | None) -> list[str]:
        """The setting's options as single-value grid axes (all settings: every value)."""
        names = [k for k, _ in selection.settings[0].values]
        out_axes = []
        for name in names:
            values = (
                [v for s in selection.settings for k, v in s.values if k == name]
                if setting is None
                else [v for k, v in setting.values if k == name]
            )
            texts = list(dict.fromkeys(_grid_text(v) for v in values))
            out_axes.append(f"{name.replace('_', '-')}={','.join(texts)}")
        return out_axes

    sweeps = [SweepConfig(grid=[*axes(None), "vrn=0", seed_axis], overrides=overrides, **common)]
    for setting in selection.settings:
        tuned = {
            **overrides,
            "vrn_tuning_grid": lambda_grid_text(setting.grid),
            "vrn_tuning_split": SPLIT,
            "vrn_tuning_criterion": CRITERION,
        }
        grid = [*axes(setting), f"vrn={lambda_grid_text([setting.selected])}", seed_axis]
        sweeps.append(SweepConfig(grid=grid, overrides=tuned, **common))
    inputs: list[Path] = []
    for config in sweeps:
        if on_sweep is not None:
            on_sweep(config.command_line())
        result = sweep(config)
        inputs += [result.out / cell.name / "analysis" for cell in result.cells]
    written = Path(out) / "comparison"
    compare(CompareConfig(inputs=sorted(inputs), out=written))
    return written / "report.html"


def _grid_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return lambda_grid_text([value])
    return str(value)
