"""``reproduce``: re-run what made a comparison (or one analysis) and check the new results
against the old, number by number (docs/reproducibility.md; :mod:`cl_diag.cli.reproduce`).

Nothing is guessed: a comparison's provenance.json names its runs, and each result.json the
commands that made it (``commands.train``, ``commands.analyze``). :func:`reproduce` runs them
again::

    OUT/<run>/last.pt, metrics.csv      each run trained again with its recorded options
    OUT/<run>/analysis/                 ... and analysed again with its recorded options
    OUT/comparison/                     the re-run compared as the original was
    OUT/reproduction.md, .html, .json   original against re-run (cl_diag.report.reproduction)

A ``checkpoint`` is analysed again without training, after checking that its weights are the
ones analysed; an embeddings file after checking its bytes. ``runs`` re-runs K runs, one of
each configuration first; an interrupted reproduction continues where it stopped.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cl_diag.errors import UserError
from cl_diag.io.embeddings import sha256_of
from cl_diag.io.jsonfile import parse_json
from cl_diag.io.output import check_targets, ensure_writable_parent, staged_output
from cl_diag.options import REPRODUCE, in_config
from cl_diag.orchestration.analysis_config import ANALYSIS_FILES
from cl_diag.orchestration.analyze import AnalyzeConfig
from cl_diag.orchestration.compare import PROVENANCE_NAME, PROVENANCE_SCHEMA
from cl_diag.report.reproduction import (
    Reproduction,
    check_reproduction,
    reproduction_files,
    spot_check_runs,
)
from cl_diag.result import RESULT_NAME, Result, load

if TYPE_CHECKING:
    from cl_diag.training.loop import FitProgress

__all__ = ["REPRODUCTION_FILES", "ReproduceConfig", "ReproduceResult", "reproduce"]

#: the files the reproduction writes into its folder, beside the re-run runs
REPRODUCTION_FILES = ("reproduction.md", "reproduction.html", "reproduction.json")
#: where a reproduction goes when no --out is given: runs/reproduce/<the original's name>
DEFAULT_ROOT = Path("runs") / "reproduce"


@dataclass
class ReproduceConfig:
    target: Path
    """A comparison folder (with provenance.json), a sweep folder holding one, or one analysis
    folder (with result.json)."""
    out: Path | None = None
    """The new folder (default runs/reproduce/<name of the original>)."""
    runs: int | None = None
    """Re-run only this many runs (a spot check), one of each configuration first."""
    checkpoint: Path | None = None
    """One analysis only: analyse this checkpoint again instead of training it again."""


@dataclass
class ReproduceResult:
    out: Path
    reproduction: Reproduction
    files: list[Path] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when everything is exact or within noise, 1 when something differs."""
        return 0 if self.reproduction.reproduced else 1


@dataclass(frozen=True)
class _Run:
    name: str  # the run's folder in the new reproduction (and its name on both sides)
    analysis: Path  # the original analysis folder
    result: Result


@dataclass(frozen=True)
class _Original:
    folder: Path  # the comparison folder, or the analysis folder
    name: str  # what the default output folder is called after
    runs: list[_Run]
    comparison: dict[str, Any] | None  # provenance.json of a comparison; None for one analysis

    @property
    def single(self) -> bool:
        return self.comparison is None


def _read_provenance(path: Path) -> dict[str, Any]:
    fix = "Re-make the comparison (cl-diag compare or sweep)."
    try:
        record = parse_json(path.read_text(encoding="utf-8"), where=path, fix=fix)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path} cannot be read as JSON ({exc}); re-make the comparison.") from None
    inputs = record.get("inputs") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or record.get("schema") != PROVENANCE_SCHEMA
        or not isinstance(inputs, list)
        or not inputs
        or not all(isinstance(x, str) for x in inputs)
    ):
        raise UserError(
            f"{path} is not a comparison record of schema {PROVENANCE_SCHEMA}; re-make the "
            "comparison with this cl-diag (cl-diag compare or sweep)."
        )
    baseline = record.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or baseline not in inputs):
        raise UserError(
            f"{path} names a baseline that is not one of its inputs; the record is damaged. " + fix
        )
    return record


def _cell_names(folders: list[Path]) -> list[str]:
    """A folder name per run: a sweep cell's name for its ``analysis/`` folder, else the
    folder's own name; repeated names get -2, -3, ..."""
    names: list[str] = []
    for folder in folders:
        base = folder.parent.name if folder.name == "analysis" else folder.name
        base = base or "run"
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}-{k}"
        names.append(name)
    return names


def _locate(target: Path) -> _Original:
    """What ``target`` is: one analysis, a comparison, or a sweep folder holding one."""
    target = Path(target)
    if not target.is_dir():
        raise UserError(
            f"{target} is not a folder. Give a comparison folder (with {PROVENANCE_NAME}), a "
            f"sweep folder, or an analysis folder (with {RESULT_NAME}) that cl-diag wrote."
        )
    if (target / RESULT_NAME).is_file():
        result = load(target / RESULT_NAME)
        name = target.parent.name if target.name == "analysis" else target.name
        return _Original(target, name or "analysis", [_Run(name, target, result)], None)
    comparison = target
    if not (comparison / PROVENANCE_NAME).is_file() and (target / "comparison").is_dir():
        comparison = target / "comparison"
    record_path = comparison / PROVENANCE_NAME
    if not record_path.is_file():
        if (comparison / "report.md").is_file():
            raise UserError(
                f"{comparison} holds a comparison written before cl-diag recorded what made it "
                f"(no {PROVENANCE_NAME}). Re-make it with this cl-diag (the same sweep or "
                "compare command), then reproduce it."
            )
        raise UserError(
            f"{target} holds neither a comparison ({PROVENANCE_NAME}) nor an analysis "
            f"({RESULT_NAME}). Give a folder that cl-diag compare, sweep or analyze wrote."
        )
    record = _read_provenance(record_path)
    folders = []
    for given in record["inputs"]:
        path = Path(given)
        folder = path if path.is_absolute() else (comparison / path)
        folders.append(Path(os.path.normpath(folder)))
    runs = []
    for name, folder in zip(_cell_names(folders), folders, strict=True):
        file = folder if folder.suffix == ".json" else folder / RESULT_NAME
        if not file.is_file():
            raise UserError(
                f"{record_path} names the run {folder}, which holds no {RESULT_NAME}; the "
                "comparison's runs must be where it recorded them."
            )
        runs.append(_Run(name, folder, load(file)))
    swept = record.get("sweep") is not None and comparison.name == "comparison"
    name = comparison.resolve().parent.name if swept else comparison.resolve().name
    return _Original(comparison, name or "comparison", runs, record)


def _check_options(config: ReproduceConfig, original: _Original, out: Path) -> None:
    REPRODUCE["runs"].normalise(config.runs)  # a whole number >= 1 (cl_diag.options)
    if config.runs is not None and config.runs > len(original.runs):
        raise UserError(
            f"--runs {config.runs}: the original has {len(original.runs)} run(s); give a number "
            f"from 1 to {len(original.runs)}."
        )
    if config.checkpoint is not None and not original.single:
        raise UserError(
            "--checkpoint re-analyses the checkpoint of one analysis; give an analysis folder "
            f"(with {RESULT_NAME}), not a comparison, or drop --checkpoint."
        )
    if config.checkpoint is not None and not Path(config.checkpoint).is_file():
        raise UserError(f"--checkpoint {config.checkpoint} is not a file.")
    resolved = out.resolve()
    for folder in [original.folder, *(run.analysis for run in original.runs)]:
        folder = folder.resolve()
        if resolved == folder or folder in resolved.parents or resolved in folder.parents:
            raise UserError(
                f"--out {out} overlaps the original {folder}; a reproduction goes into a folder "
                "of its own. Choose another --out."
            )
    ensure_writable_parent(out)
    for run in original.runs:
        commands = run.result.commands
        if commands is None or commands.analyze is None:
            raise UserError(
                f"{run.analysis} records no commands (it was written before cl-diag recorded "
                "them), so nothing can be re-run without guessing. Re-make it with this "
                "cl-diag, then reproduce it."
            )
        kind = run.result.source.kind
        if kind not in ("checkpoint", "embeddings"):
            raise UserError(
                f"{run.analysis} was measured from Python ({kind}: cl_diag.measure or "
                "cl_diag.analyze), which records no command to re-run; reproduce it by running "
                "your script again."
            )


# --------------------------------------------------------------------------- one run again


@dataclass(frozen=True)
class _Plan:
    """What one run is made again with, parsed and checked before anything is run: its
    recorded analysis and, for a run cl-diag trained, its recorded training options."""

    analysis: AnalyzeConfig
    training: dict[str, Any] | None


def _plan(run: _Run) -> _Plan:
    """The run's recorded commands, each value checked against its declaration, and confined:
    a recorded data root is read, never created (it must be there), and a recorded download is
    turned off (a reproduction writes nothing outside its --out)."""
    from cl_diag.orchestration.train import TrainConfig, check_train_options

    commands = run.result.commands
    assert commands is not None and commands.analyze is not None
    analysis = AnalyzeConfig.from_record(commands.analyze)
    for name in ("data_root", "val_root"):
        _read_only(run, f"analysis's {name}", getattr(analysis, name))
    if commands.train is None:
        return _Plan(analysis, None)
    recorded = dict(commands.train)
    unknown = sorted(set(recorded) - set(TrainConfig.option_names()))
    if unknown:
        raise UserError(
            f"{run.analysis}: the recorded training options name {', '.join(unknown)}, which "
            "this cl-diag does not know; reproduce it with the cl-diag version that wrote it."
        )
    # a reproduction reads the data where the run read it and never downloads: a recorded
    # download is turned off, and the data root must be there (_read_only, below)
    recorded["download"] = False
    try:
        where = in_config(run.analysis / RESULT_NAME, checkpoint=False)
        check_train_options(TrainConfig(**recorded), where)
    except TypeError as exc:
        raise UserError(
            f"{run.analysis}: its recorded training options are damaged ({exc})."
        ) from None
    for name in ("data_root", "val_root"):
        _read_only(run, f"training's {name}", recorded.get(name))
    return _Plan(analysis, recorded)


def _read_only(run: _Run, what: str, folder: object) -> None:
    """A folder a recorded command reads: checked, never created."""
    if folder is not None and not Path(str(folder)).expanduser().is_dir():
        raise UserError(
            f"{run.analysis}: its {what} {str(folder)!r} is not a folder here; a reproduction "
            "reads the data where the run read it, and never downloads or creates anything "
            "outside its --out. Put the data there (cl-diag train --download fetches CIFAR), "
            "then reproduce."
        )


def _train_again(run: _Run, plan: _Plan, folder: Path, progress: FitProgress | None) -> Path:
    """Train the run's recorded options into ``folder`` (resuming a run cut short there)."""
    from cl_diag.orchestration.train import TrainConfig, train

    assert plan.training is not None
    last = folder / "last.pt"
    options = {
        **plan.training,
        # where and how this run writes, not what it computes: the new folder, no display, and
        # the data-loader workers of this machine
        "out": str(folder),
        "resume": str(last) if last.is_file() else None,
        "overwrite": False,
        "quiet": True,
        "workers": None,
    }
    train(TrainConfig(**options), progress=progress)
    return last


def _check_weights(path: Path, analysis: AnalyzeConfig, expected: str | None, what: str) -> None:
    """UserError unless the checkpoint at ``path`` holds the weights the original analysed."""
    from cl_diag.models import KeyMapping, read_checkpoint_file, weights_sha256

    mapping = KeyMapping.parse(
        backbone_prefix=analysis.backbone_prefix,
        projector_prefix=analysis.projector_prefix,
        renames=analysis.renames,
    )
    file = read_checkpoint_file(path, arch=analysis.arch, mapping=mapping)
    if file.kind == "embeddings":
        raise UserError(f"{what} {path} is an embeddings file, not a checkpoint.")
    found = weights_sha256(file)
    if expected is not None and found != expected:
        raise UserError(
            f"{what} {path} holds other weights than the checkpoint the original analysed "
            f"(weights sha256 {found[:12]}… against {expected[:12]}…). Give that checkpoint."
        )


def _run_again(
    run: _Run, plan: _Plan, folder: Path, checkpoint: Path | None, progress: FitProgress | None
) -> Result:
    """The run made again into ``folder``: trained (unless a checkpoint is given or it was not
    trained by cl-diag) and analysed with its recorded options."""
    from cl_diag.orchestration.analyze import analyze

    result = run.result
    analysis = plan.analysis
    source = result.source
    if checkpoint is not None:
        _check_weights(checkpoint, analysis, source.weights_sha256, "--checkpoint")
        given = checkpoint
    elif source.kind == "embeddings":
        given = analysis.input
        if _file_sha256(given) != source.sha256:
            raise UserError(
                f"{run.analysis} measured the embeddings file {given}, which is missing or has "
                "changed since (its sha256 differs); put the original file there to reproduce it."
            )
    elif plan.training is not None:
        given = _train_again(run, plan, folder, progress)
    else:  # a foreign checkpoint: analysed again from where it was, if it is still the same
        given = analysis.input
        if not given.is_file():
            raise UserError(
                f"{run.analysis} analysed {given}, a checkpoint cl-diag did not train and which is "
                "not there now; give it with --checkpoint."
            )
        _check_weights(given, analysis, source.weights_sha256, "The recorded checkpoint")
    again = replace(analysis, input=given, out=folder / "analysis", workers=None, overwrite=False)
    return analyze(again).result


# --------------------------------------------------------------------------- the reproduction


def reproduce(
    config: ReproduceConfig,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
    train_progress: Callable[[str], FitProgress] | None = None,
) -> ReproduceResult:
    """Re-run the original ``config.target`` into ``config.out`` and compare (module
    docstring). ``on_progress(run, done, total)`` follows the runs (first with an empty name);
    ``train_progress(run)`` gives a progress callback for a run's training."""
    from cl_diag.orchestration.compare import CompareConfig, compare, recorded_plan
    from cl_diag.report import write_files

    original = _locate(config.target)
    out = Path(config.out) if config.out is not None else DEFAULT_ROOT / original.name
    _check_options(config, original, out)
    pairs = [(run.name, run.result) for run in original.runs]
    selected = (
        list(range(len(pairs))) if config.runs is None else spot_check_runs(pairs, config.runs)
    )
    # everything that can be refused is refused here, before the first run and before --out
    plans = {i: _plan(original.runs[i]) for i in selected}
    folders = [out if original.single else out / run.name for run in original.runs]
    check_targets(out, REPRODUCTION_FILES, overwrite=False, kind="reproduction")
    for i in selected:
        analysis = folders[i] / "analysis"
        check_targets(analysis, ANALYSIS_FILES, overwrite=False, kind="analysis")
    out.mkdir(parents=True, exist_ok=True)
    reproduced: list[Result | None] = [None] * len(pairs)
    if on_progress is not None:
        on_progress("", 0, len(selected))
    for done, i in enumerate(selected, start=1):
        run = original.runs[i]
        folders[i].mkdir(parents=True, exist_ok=True)
        progress = train_progress(run.name) if train_progress is not None else None
        reproduced[i] = _run_again(run, plans[i], folders[i], config.checkpoint, progress)
        if on_progress is not None:
            on_progress(run.name, done, len(selected))
    record = original.comparison
    if record is not None and config.runs is None:
        # the re-run compared as the original was: the same runs, in the same order
        baseline = None
        if record.get("baseline") is not None:
            recorded = [Path(p) for p in record["inputs"]]
            at = recorded.index(Path(record["baseline"]))
            baseline = folders[at] / "analysis"
        compare(
            CompareConfig(
                inputs=[folder / "analysis" for folder in folders],
                out=out / "comparison",
                baseline=baseline,
                plan=recorded_plan(record),
            )
        )
    result = check_reproduction(
        pairs,
        reproduced,
        original_name=str(original.folder),
        reproduction_name=str(out),
    )
    with staged_output(out, kind="reproduction") as staging:
        write_files(reproduction_files(result), staging)
    return ReproduceResult(
        out=out, reproduction=result, files=[out / n for n in REPRODUCTION_FILES]
    )


def _file_sha256(path: Path) -> str | None:
    """The SHA-256 of a regular file's bytes; None for anything else (missing, a folder, a
    FIFO, unreadable)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        return sha256_of(path)
    except OSError:
        return None
