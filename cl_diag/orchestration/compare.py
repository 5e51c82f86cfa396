"""``compare``: several result.json files side by side, never recomputed
(:mod:`cl_diag.cli.compare` is its command line). The results (files, folders, or results
in memory from Python) are read with :func:`cl_diag.result.load`, made into the one comparison
frame and rendered into a staging folder moved into place only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from cl_diag.errors import UserError
from cl_diag.io.output import (
    OWNED_FILES,
    check_targets,
    dumps_json,
    ensure_writable_parent,
    staged_output,
)
from cl_diag.io.paths import why_missing
from cl_diag.io.plans import PlanRecord, load_plan
from cl_diag.report import Comparison, comparison_warnings, render_comparison, write_files
from cl_diag.report.document import Table
from cl_diag.report.headline import comparison_html, comparison_table, comparison_text
from cl_diag.result import RESULT_NAME, Result, load


@dataclass
class CompareConfig:
    inputs: Sequence[Path | Result]
    """result.json files, or folders holding one (``cl-diag analyze --out`` folders); from
    Python also results in memory, each named ``runs[i]`` by its place among the inputs."""
    out: Path | None
    """Where the report goes; None (from Python): nothing is written, the comparison is only
    returned (its frame, labels, warnings and headline)."""
    baseline: Path | Result | None = None
    """One run (file, folder or result) the others are differenced against; added if not among
    ``inputs`` (a result in memory so added is named ``baseline``)."""
    overwrite: bool = False
    """Replace files in ``out`` that cl-diag cannot prove it wrote (see cl_diag.io.output)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Run -> the label the report calls it (``--label DIR=NAME``): a run is named as among
    ``inputs`` (the folder or result file; a result in memory by its place, ``runs[i]``); the
    others keep their automatic labels."""
    sweep: dict[str, Any] | None = None
    """The sweep that made the runs (:meth:`~cl_diag.orchestration.sweep.SweepConfig.record`),
    recorded in provenance.json beside the inputs."""
    plan: Path | PlanRecord | None = None
    """The study's plan (``--plan``: a plans/*.toml file, or its record as a provenance.json
    holds it): recorded in provenance.json with its SHA-256; the report shows it, lists its
    primary claims first and says where the runs differ from its design."""


#: the comparison's record of what made it (schema ``PROVENANCE_SCHEMA``): the inputs, relative to
#: the comparison's folder, and the sweep that made them; ``cl-diag reproduce`` starts from it
PROVENANCE_NAME = "provenance.json"
PROVENANCE_SCHEMA = "cl-diag/provenance/1"


def read_plan(given: Path | PlanRecord) -> PlanRecord:
    """The plan ``given`` (a file, read and hashed, or a record already read), its claim keys
    checked against the registry; a bad plan is a :class:`UserError`."""
    from cl_diag.report.claims import CLAIMS

    record = given if isinstance(given, PlanRecord) else load_plan(Path(given))
    unknown = [k for k in (*record.plan.primary, *record.plan.secondary) if k not in CLAIMS]
    if unknown:
        raise UserError(
            f"The plan {record.path} names claims the registry does not have: "
            f"{', '.join(unknown)}. Use the keys of docs/claims.md."
        )
    return record


def recorded_plan(record: dict[str, Any]) -> PlanRecord | None:
    """The plan a provenance.json records (None when it records none); a malformed record is a
    :class:`UserError` naming its key."""
    given = record.get("plan")
    return None if given is None else PlanRecord.from_dict(given)


def provenance(
    config: CompareConfig,
    runs: list[tuple[str, Path]],
    baseline: str | None,
    plan: PlanRecord | None = None,
) -> dict[str, Any]:
    """provenance.json's content: each run's folder (or result file, when not called
    result.json) in the report's order, ``baseline`` the baseline run's name, and the sweep
    record. A run named by a relative path is recorded relative to the comparison's folder
    (the record stays true when the folders move together), one named by an absolute path
    as that path, as the report links them. Each run's result.json records the commands that
    made it."""
    assert config.out is not None  # a comparison in memory records no provenance
    out = Path(config.out)

    def where(name: str, path: Path) -> str:
        target = path.parent if path.name == RESULT_NAME else path
        if Path(name).is_absolute():
            return target.as_posix()
        return Path(os.path.relpath(target, out.resolve())).as_posix()

    places = {name: where(name, path) for name, path in runs}
    return {
        "schema": PROVENANCE_SCHEMA,
        "inputs": list(places.values()),
        "baseline": None if baseline is None else places[baseline],
        "sweep": config.sweep,
        **({} if plan is None else {"plan": plan.to_dict()}),
    }


@dataclass
class CompareResult:
    out: Path | None  # None: compared in memory, nothing written
    report_md: Path | None
    report_html: Path | None
    csv: Path | None
    files: list[Path] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    """run name (as given) -> label used in the report"""
    warnings: list[str] = field(default_factory=list)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    """one row per run (display order): label, config facts and every compared metric"""
    headline: Table | None = field(default=None, repr=False)
    """the runs' headline numbers (:func:`cl_diag.report.headline.comparison_table`)"""

    def _title(self) -> str:
        runs = len(self.labels)
        warned = f"; {len(self.warnings)} warning(s) in .warnings" if self.warnings else ""
        where = self.report_html if self.out is not None else "in memory (no out= given)"
        return f"cl-diag comparison of {runs} run(s): {where}{warned}"

    def __repr__(self) -> str:
        """A few lines: the runs, the report's path and the runs' headline numbers."""
        if self.headline is None:
            return self._title()
        return comparison_text(self.headline, self._title())

    def _repr_html_(self) -> str:
        """The runs' headline numbers as an HTML table (IPython/Jupyter display protocol)."""
        from html import escape

        if self.headline is None:
            return f"<p>{escape(self._title())}</p>"
        return comparison_html(self.headline, self._title())


@dataclass(frozen=True)
class _Run:
    name: str
    #: the result file; None for a result given in memory (no file, no report to link)
    path: Path | None
    result: Result = field(repr=False)

    @property
    def key(self) -> object:
        """What makes two inputs one run: the same file, or the same object in memory."""
        return self.path if self.path is not None else id(self.result)


def _result_path(given: Path) -> Path:
    path = Path(given)
    if not path.exists():
        raise UserError(
            f"{given} {why_missing(given)}. Pass result.json files or the folders "
            "`cl-diag analyze --out` wrote."
        )
    if path.is_dir():
        candidate = path / RESULT_NAME
        if not candidate.is_file():
            raise UserError(
                f"The folder {given} has no {RESULT_NAME}. Pass a folder written by "
                "`cl-diag analyze --out` (or the result file itself); run `cl-diag analyze` first "
                "if this run was never analysed."
            )
        return candidate
    return path


def _run_name(given: Path, result_path: Path) -> str:
    # the folder the user named (the label fallback); a bare result.json names its folder
    source = (
        Path(given)
        if Path(given).is_dir()
        else (result_path.parent if result_path.name == RESULT_NAME else result_path)
    )
    name = source.as_posix()
    if name in (".", ""):
        name = source.resolve().name or "."
    return name


def _load(given: Path | Result, name: str) -> _Run:
    """The run ``given``: a file or folder is named by its path, a result in memory ``name``."""
    if isinstance(given, Result):
        return _Run(name=name, path=None, result=given)
    path = _result_path(given)
    return _Run(name=_run_name(given, path), path=path.resolve(), result=load(path))


def _check_out(out: Path, runs: list[_Run]) -> None:
    target = Path(out).resolve()
    for run in runs:
        if run.path is not None and run.path.parent == target:
            raise UserError(
                f"--out {out} is the folder of the run {run.name}; writing there would replace "
                "that run's own reports. Choose another folder for the comparison."
            )
    if (Path(out) / RESULT_NAME).exists():
        raise UserError(
            f"--out {out} holds a {RESULT_NAME} (an analysis folder). Choose another folder for "
            "the comparison."
        )


def _report_links(runs: list[_Run], out: Path) -> dict[str, str]:
    """Run name -> the link from the comparison's folder to the run's own report.html, for the
    runs that have one. A run named by a relative path gets a relative link (the report opens
    wherever the folders move together); one named by an absolute path, an absolute link, so
    that the same inputs give the same bytes wherever the comparison is written."""
    links = {}
    for run in runs:
        if run.path is None or not (run.path.parent / "report.html").is_file():
            continue
        named = PurePosixPath(Path(run.name).as_posix())
        # the name is the run's folder, or (a result file not called result.json) the file
        folder = named.parent if run.path.name != RESULT_NAME else named
        target = folder / "report.html"
        if target.is_absolute():
            links[run.name] = target.as_posix()
        else:
            links[run.name] = Path(os.path.relpath(target, out)).as_posix()
    return links


def _given_labels(labels: dict[str, str], runs: list[_Run]) -> dict[str, str]:
    """``--label DIR=NAME`` as run name -> label. DIR names a run as it was given (its folder
    or result file, matched by the file it resolves to, or a result in memory's ``runs[i]``);
    a DIR that is no run, an empty NAME or one NAME for two runs is refused."""
    out: dict[str, str] = {}
    for where, label in labels.items():
        label = label.strip()
        if not label:
            raise UserError(f"--label {where}= gives an empty name. Write --label {where}=NAME.")
        match = [r for r in runs if r.name == where]
        if not match and Path(where).exists():
            path = _result_path(Path(where)).resolve()
            match = [r for r in runs if r.path == path]
        if not match:
            raise UserError(
                f"--label {where}={label}: {where} is not one of the runs compared "
                f"({', '.join(r.name for r in runs)}). Name a run's folder or result file as "
                "given, e.g. --label runs/a/analysis=baseline."
            )
        out[match[0].name] = label
    counts: dict[str, int] = {}
    for label in out.values():
        counts[label] = counts.get(label, 0) + 1
    twice = sorted(label for label, n in counts.items() if n > 1)
    if twice:
        raise UserError(
            f"--label gives the name {twice[0]!r} to more than one run. Give each run its own."
        )
    return out


def compare(config: CompareConfig) -> CompareResult:
    """Compare the runs of ``config.inputs`` into ``config.out`` (report.md, report.html,
    comparison.csv, SVGs)."""
    if not config.inputs:
        raise UserError(
            "No runs to compare. Pass one or more result.json files or analysis folders."
        )
    if config.out is not None:  # a bad --out is named before the inputs are read
        ensure_writable_parent(Path(config.out))
    plan = None if config.plan is None else read_plan(config.plan)
    runs: list[_Run] = []
    seen: set[object] = set()
    for index, given in enumerate(config.inputs):
        run = _load(given, f"runs[{index}]")
        if run.key not in seen:  # a file named twice (e.g. by overlapping globs) is one run
            seen.add(run.key)
            runs.append(run)
    baseline: _Run | None = None
    if config.baseline is not None:
        base = _load(config.baseline, "baseline")
        match = [r for r in runs if r.key == base.key]
        baseline = match[0] if match else base
        if not match:
            runs.insert(0, base)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        # distinct files whose given names coincide (e.g. "x.json" in two folders named alike):
        # fall back to the resolved paths, which are distinct (a result in memory keeps its
        # place, runs[i], which no path is)
        runs = [
            r if r.path is None else _Run(name=r.path.as_posix(), path=r.path, result=r.result)
            for r in runs
        ]
    baseline_name = (
        None if baseline is None else next(r.name for r in runs if r.key == baseline.key)
    )
    if config.out is not None:
        _check_out(config.out, runs)
        check_targets(
            config.out,
            ["report.md", "report.html", PROVENANCE_NAME],
            overwrite=config.overwrite,
            kind="comparison",
        )

    pairs = [(r.name, r.result) for r in runs]
    labelled = _given_labels(config.labels, runs)
    # the CLI's warnings name the runs in the order given; the report's, in display order
    comparison = Comparison(
        pairs,
        baseline=baseline_name,
        reports={} if config.out is None else _report_links(runs, Path(config.out)),
        labels=labelled,
        plan=plan,
    )
    warnings = comparison_warnings(
        pairs, dict(zip(comparison.names, comparison.labels, strict=True))
    )
    label_of = dict(zip(comparison.names, comparison.labels, strict=True))
    result_of = {r.name: r.result for r in runs}
    headline = comparison_table(
        [(label_of[name], result_of[name]) for name in comparison.names]  # display order
    )
    if config.out is None:  # in memory: the comparison itself, nothing written
        return CompareResult(
            out=None,
            report_md=None,
            report_html=None,
            csv=None,
            labels={r.name: label_of[r.name] for r in runs},
            warnings=warnings,
            frame=comparison.frame,
            headline=headline,
        )
    out = Path(config.out)
    path_of = {r.name: r.path for r in runs}
    files_only = [(name, path_of[name]) for name in comparison.names if path_of[name] is not None]
    # provenance.json names each run's folder for `cl-diag reproduce`: a result given in memory
    # (from Python) has none, so a comparison holding one records no provenance
    record = None
    if len(files_only) == len(runs):
        record = provenance(
            config, [(n, p) for n, p in files_only if p is not None], baseline_name, plan
        )
    with staged_output(out, kind="comparison", overwrite=config.overwrite) as staging:
        written = render_comparison(comparison, staging)
        if record is not None:
            provenance_bytes = dumps_json(record).encode("utf-8")
            written += write_files([(PROVENANCE_NAME, provenance_bytes)], staging)
        files = [out / p.relative_to(staging) for p in written] + [out / OWNED_FILES]
    return CompareResult(
        out=out,
        report_md=out / "report.md",
        report_html=out / "report.html",
        csv=out / "comparison.csv",
        files=files,
        labels={r.name: label_of[r.name] for r in runs},
        warnings=warnings,
        frame=comparison.frame,
        headline=headline,
    )
