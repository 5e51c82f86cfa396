"""The Plan section of a comparison: the study's declared plan, its hash, and where the runs
differ from its design (issue 33). It says when the plan was declared, the SHA-256 of the plan
and its prose, the question, the primary and secondary claims and the analysis, and states as
a difference from the plan a planned value no run has, a value no plan named, or a planned
option the runs do not record.
"""

from __future__ import annotations

from collections.abc import Sequence

from cl_diag.io.plans import PlanRecord
from cl_diag.report.document import Heading, Note, Paragraph
from cl_diag.runconfig import RunConfig

__all__ = ["design_differences", "plan_blocks"]


def _norm(value: object) -> str:
    """One spelling per option value: booleans and yes/no alike, numbers as floats."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return repr(float(value))
    text = str(value).strip().lower()
    if text in ("true", "yes", "on"):
        return "yes"
    if text in ("false", "no", "off"):
        return "no"
    try:
        return repr(float(text))
    except ValueError:
        return text


def _shown(values: set[str]) -> str:
    def order(v: str) -> tuple[int, float, str]:
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)

    return "{" + ", ".join(v.removesuffix(".0") for v in sorted(values, key=order)) + "}"


def design_differences(record: PlanRecord, configs: Sequence[RunConfig]) -> list[str]:
    """How the runs differ from the plan's grid, one sentence per difference ([] when they
    follow it): planned values no run has, values no plan named, options the runs do not
    record, and a run count other than the plan's (``runs``, else the grid's product)."""
    grid = record.plan.grid
    out = []
    expected = 1
    for option, planned_values in grid.items():
        name = option.replace("-", "_")
        expected *= len(planned_values)
        if not configs or name not in configs[0].options:
            out.append(f"the planned option {option} is not among the options the runs record")
            continue
        planned = {_norm(v) for v in planned_values}
        seen = {_norm(c.option(name)) for c in configs}
        if missing := planned - seen:
            out.append(f"{option}: the plan's {_shown(missing)} has no run")
        if extra := seen - planned:
            out.append(f"{option}: the runs' {_shown(extra)} is not in the plan")
    planned_runs = record.plan.runs if record.plan.runs is not None else expected
    if (grid or record.plan.runs is not None) and planned_runs != len(configs):
        out.append(f"the plan has {planned_runs} runs; the comparison has {len(configs)}")
    return out


def plan_blocks(record: PlanRecord, configs: Sequence[RunConfig]) -> list:
    """The Plan section's blocks."""
    plan = record.plan
    prose = (
        f"; its prose, {plan.text}, SHA-256 {record.text_sha256[:12]}…"
        if plan.text is not None and record.text_sha256 is not None
        else ""
    )
    when = (
        "declared before the runs"
        if plan.declared == "before the runs"
        else "recorded after the runs (retrospectively: it states the design the runs had, "
        "not a choice made before seeing them)"
    )
    blocks: list = [
        Heading(2, "Plan"),
        Paragraph(
            f"The study's plan, {record.path} (SHA-256 {record.short_hash}…{prose}), "
            f"{when}. Question: {plan.question}"
        ),
        Paragraph(
            "Primary claims: "
            + ", ".join(f"`{k}`" for k in plan.primary)
            + (
                "; secondary: " + ", ".join(f"`{k}`" for k in plan.secondary)
                if plan.secondary
                else ""
            )
            + ". The Findings list the primary claims first. Analysis: "
            + plan.analysis
            + (f" Selection: {plan.selection}" if plan.selection else "")
        ),
    ]
    differences = design_differences(record, configs)
    if differences:
        blocks.append(
            Note("The runs differ from the plan's design: " + "; ".join(differences) + ".")
        )
    elif plan.grid:
        blocks.append(
            Paragraph(
                "The runs follow the plan's design: "
                + "; ".join(
                    f"{k} ∈ {_shown({_norm(v) for v in vs})}" for k, vs in plan.grid.items()
                )
                + f" ({len(configs)} runs)."
            )
        )
    return blocks
