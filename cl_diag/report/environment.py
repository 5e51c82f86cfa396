"""The environment section of a report: the fingerprints the runs were trained and analysed
under (:mod:`cl_diag.environment`), collapsed at the report's end, with the guarantee they carry.

One column per distinct fingerprint; a row whose value differs between the columns is marked,
so a reader sees at once what changed between two environments (``cl-diag reproduce`` shows
the original and the reproduction's side by side with :func:`fingerprint_table`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cl_diag.environment import flatten_fingerprint
from cl_diag.report.document import MISSING, Details, Paragraph, Table, fmt_setting
from cl_diag.result import Environment, Result

__all__ = [
    "GUARANTEE",
    "analysis_environment",
    "comparison_environment",
    "distinct_environments",
    "fingerprint_table",
]

#: the reproducibility guarantee, in the words every report and reference README uses
GUARANTEE = (
    "The same inputs, options and seed give byte-identical results under an equal fingerprint; "
    "under another fingerprint the results are statistically equal, not identical, and "
    "`cl-diag reproduce` checks that they agree within replicate noise "
    "(docs/reproducibility.md)."
)

#: what the fingerprint is, before the table
_INTRO = (
    "What the last bits of these numbers depend on besides the inputs, options and seed: the "
    "CPU and the ATen CPU capability torch dispatched to, threads and workers, the device, "
    "library versions and builds, determinism and TF32 flags, and the environment variables "
    "that select kernels or threads."
)


def _value(value: Any) -> str:
    if value is None:
        return MISSING
    return fmt_setting(value)


def fingerprint_table(
    columns: Sequence[tuple[str, Environment | Mapping[str, Any] | None]], caption: str = ""
) -> Table:
    """Fields (rows) of each fingerprint (columns, titled); with two columns or more a last
    column marks the fields that differ."""
    flats = [
        flatten_fingerprint(env.to_dict() if isinstance(env, Environment) else env)
        for _, env in columns
    ]
    fields: list[str] = []
    for flat in flats:
        fields += [key for key in flat if key not in fields]
    several = len(columns) > 1
    rows = []
    for key in fields:
        values = [flat.get(key) for flat in flats]
        row = [key, *(_value(v) for v in values)]
        if several:
            row.append("differs" if any(v != values[0] for v in values[1:]) else "")
        rows.append(row)
    titles = ["field", *(title for title, _ in columns)] + (["≠"] if several else [])
    return Table(columns=titles, rows=rows, caption=caption)


def _key(env: Environment | None) -> str:
    return json.dumps(None if env is None else env.to_dict(), sort_keys=True)


def distinct_environments(
    runs: Sequence[Result],
) -> list[tuple[str, Environment | None]]:
    """The distinct fingerprints of ``runs``' trainings and analyses, each titled by what it
    covers ("training and analysis of 18 runs", "analysis of run 3", ...), in first-seen
    order; fingerprints a result does not carry (an embeddings file has no training; results
    written before cl-diag recorded them have neither) are left out."""
    found: dict[str, dict[str, Any]] = {}
    for i, result in enumerate(runs):
        stages = (("training", result.source.environment), ("analysis", result.environment))
        for stage, env in stages:
            if env is None:
                continue
            entry = found.setdefault(_key(env), {"env": env, "training": [], "analysis": []})
            entry[stage].append(i + 1)
    columns = []
    for entry in found.values():
        parts = []
        training, analysis = entry["training"], entry["analysis"]
        if training and training == analysis:
            parts.append(f"training and analysis of {_runs(training, len(runs))}")
        else:
            parts += [
                f"{stage} of {_runs(entry[stage], len(runs))}"
                for stage in ("training", "analysis")
                if entry[stage]
            ]
        columns.append((", ".join(parts), entry["env"]))
    return columns


def _runs(indices: list[int], total: int) -> str:
    if total == 1:
        return "this run"
    if len(indices) == total:
        return f"all {total} runs"
    return ("run " if len(indices) == 1 else "runs ") + ", ".join(str(i) for i in indices)


def _details(columns: list[tuple[str, Environment | None]]) -> list[Details]:
    if not columns:
        return []
    body: tuple = (
        Paragraph(_INTRO + " " + GUARANTEE),
        fingerprint_table(columns, caption="Environment fingerprint."),
    )
    return [Details("Environment", body)]


def analysis_environment(result: Result) -> list[Details]:
    """The environment section of one run's report: its analysis's fingerprint and, for a
    cl-diag checkpoint, its training's."""
    return _details(distinct_environments([result]))


def comparison_environment(results: Sequence[Result]) -> list[Details]:
    """The environment section of a comparison: each distinct fingerprint once, titled by the
    runs (numbered in the report's order) trained or analysed under it."""
    return _details(distinct_environments(results))
