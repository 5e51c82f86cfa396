"""A study's plan: what it asks, how it is run and which claims it is read for, fixed before the
runs (``plans/<study>.toml``, beside its prose ``plans/<study>.md``).

``cl-diag sweep --plan`` and ``cl-diag compare --plan`` read it, record it in the comparison's
provenance.json with the SHA-256 of its bytes (and of the prose it names), and the report shows
that hash, orders the primary claims first and says where the runs differ from the planned
design. A plan file is TOML::

    study = "reports/ccem-sigmoid"            # where the study's results go
    question = "Is the sigmoid loss's optimum the CCEM's, from ETF to antipodal?"
    declared = "before the runs"              # or "after the runs": recorded retrospectively
    text = "ccem-sigmoid.md"                  # the prose plan, relative to this file (optional)
    recipe = "trainers/sigmoid-ccem.toml"
    probe = "probes/digits-study.toml"        # optional
    primary = ["ccem_optimum"]                # claim keys of the registry (docs/claims.md)
    secondary = ["eq10_etf", "eq10_separation"]
    analysis = "per (t, b) over the 3 seeds; Holm over the report's family"
    selection = "..."                         # the decision rule of any selection (optional)

    runs = 36                                 # optional: when the grid is no full product

    [grid]                                    # the design: each varied option and its values
    temperature = [0.5, 1, 2, 4, 8, 16]
    bias = [-1, 2]
    seed = [1, 2, 3]

Only the file's bytes are read (never executed). Claim keys are checked against the registry
by the caller (:mod:`cl_diag.orchestration.compare`), which this layer cannot import.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cl_diag.errors import UserError
from cl_diag.io.records import Record, key, optional
from cl_diag.io.tomlfile import tomllib

__all__ = ["DECLARED", "PlanRecord", "StudyPlan", "load_plan"]

#: when a plan was written, relative to its study's runs
DECLARED = ("before the runs", "after the runs")
#: a plan larger than this is not a plan (a mistaken path to a data file)
_MAX_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class StudyPlan(Record):
    """A study's plan as its TOML file declares it (see the module docstring)."""

    study: str = key("the folder the study's results go to")
    question: str = key("the question the study answers")
    declared: str = key("'before the runs' or 'after the runs' (recorded retrospectively)")
    primary: tuple[str, ...] = key("the primary claims (registry keys)")
    secondary: tuple[str, ...] = key("the secondary claims (registry keys)", default=())
    recipe: str | None = optional("the training recipe")
    probe: str | None = optional("the probe suite")
    grid: dict[str, list[Any]] = key("each varied option -> its planned values", factory=dict)
    runs: int | None = optional("the planned number of runs, when the grid is no full product")
    analysis: str = key("how the runs are analysed and judged")
    selection: str | None = optional("the decision rule of any selection")
    text: str | None = optional("the prose plan, relative to the plan file")


@dataclass(frozen=True, kw_only=True)
class PlanRecord(Record):
    """A plan as a comparison records it: the file's path as given, the SHA-256 of its bytes
    and of its prose, and its content (so the report renders again without the file)."""

    path: str = key("the plan file as given")
    sha256: str = key("SHA-256 of the plan file's bytes")
    text_sha256: str | None = optional("SHA-256 of the prose plan's bytes")
    plan: StudyPlan = key("the plan's content")

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]


def _read_bytes(path: Path, what: str) -> bytes:
    if not path.is_file():
        problem = "is a folder" if path.is_dir() else "does not exist"
        raise UserError(f"The {what} {path} {problem}. Give the path of a plans/*.toml file.")
    if path.stat().st_size > _MAX_BYTES:
        raise UserError(f"The {what} {path} is over 1 MiB: not a plan. Give a plans/*.toml file.")
    return path.read_bytes()


def load_plan(path: Path) -> PlanRecord:
    """Read, check and hash the plan at ``path``; a bad plan is a :class:`UserError` naming the
    problem."""
    path = Path(path)
    data = _read_bytes(path, "plan")
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UserError(f"The plan {path} is not UTF-8 TOML ({err}). Fix the file.") from None
    plan = StudyPlan.from_dict(raw)
    if plan.extra:
        raise UserError(
            f"The plan {path} has keys a plan does not have ({', '.join(sorted(plan.extra))}). "
            "Remove or rename them (see cl_diag.io.plans)."
        )
    if plan.declared not in DECLARED:
        raise UserError(
            f"The plan {path} says declared = {plan.declared!r}. Write one of "
            f"{' or '.join(repr(d) for d in DECLARED)}."
        )
    if not plan.primary:
        raise UserError(f"The plan {path} names no primary claim. List at least one.")
    text_sha = None
    if plan.text is not None:
        if Path(plan.text).is_absolute() or ".." in Path(plan.text).parts:
            raise UserError(
                f"The plan {path} says text = {plan.text!r}. Name the prose plan beside it by a "
                "relative path without '..', e.g. text = \"my-study.md\"."
            )
        prose = _read_bytes(path.parent / plan.text, "prose plan")
        text_sha = hashlib.sha256(prose).hexdigest()
    return PlanRecord(
        path=path.as_posix(),
        sha256=hashlib.sha256(data).hexdigest(),
        text_sha256=text_sha,
        plan=plan,
    )
