"""The parts of a registry entry: where a claim is made (:class:`Source`, cited through
:data:`WORKS`), which runs it speaks of (:class:`Condition`: a domain or a scope), what is
measured on a run (:class:`Metric`, with its analysis scale and sampling error), and what a
design forms of the runs (:class:`Unit`: the runs one test is about) and estimates on a unit
(:class:`Estimate`: the effect, its standard error and degrees of freedom).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cl_diag.measurement.stats import rounding_sd, summarize
from cl_diag.report.claims.facts import RunData
from cl_diag.report.document import MISSING, fmt

# ---- the parts of an entry ------------------------------------------------------------------

#: the works a claim can come from, as a finding cites them
WORKS = {
    "paper": "Lee, Lim, Lee, Sohn (ICML 2025)",
    "rebuttal": "the authors' OpenReview rebuttal of Lee et al. (ICML 2025)",
    "SSEM": "the SSEM paper on supervised-contrastive class collapse (Lee, Oh, Lee et al.)",
    "CCEM": (
        "Lee, Chang, Sohn, Analysis of Using Sigmoid Loss for Contrastive Learning (AISTATS "
        "2024), the constant-embedding model of the sigmoid loss's optimum"
    ),
    "identity": "an identity for any unit vectors, from Lee et al. (ICML 2025)",
    "none": "no source predicts it for these runs",
}


@dataclass(frozen=True)
class Source:
    """Where a claim is made: the ``work`` (a key of :data:`WORKS`) and the place in it."""

    work: str
    where: str

    def __post_init__(self) -> None:
        if self.work not in WORKS:
            raise ValueError(f"unknown work {self.work!r}; one of {sorted(WORKS)}")

    @property
    def short(self) -> str:
        """How a finding cites it: "paper, Table 1", "rebuttal, Table 2", "SSEM, α_c"."""
        return f"{self.work}, {self.where}" if self.where else self.work

    @property
    def full(self) -> str:
        return f"{WORKS[self.work]}, {self.where}" if self.where else WORKS[self.work]


#: which runs of a unit a condition is checked on
ARMS = ("all", "control", "treatment")


@dataclass(frozen=True)
class Condition:
    """A requirement on runs: ``requires`` says it in words (the docs table, the reason of a
    *not applicable* finding), ``holds`` tests one run, ``found`` says what a run that fails
    it has instead ("loss dcl"); ``arm`` which runs of a paired unit it is checked on;
    ``summary``, for a condition on what a run's data show (its convergence) rather than on
    its config, says in a few words what the failing runs show, for the one-line summaries
    ("not converged: loss 3.54–3.63, optimum 3.154")."""

    requires: str
    holds: Callable[[RunData], bool] = field(repr=False, compare=False)
    found: Callable[[RunData], str] | None = field(default=None, repr=False, compare=False)
    arm: str = "all"
    summary: Callable[[Sequence[RunData]], str] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {self.arm!r}")

    def failing(self, unit: Unit) -> list[RunData]:
        """The runs of ``unit`` (its arm) that fail the condition."""
        return [r for r in unit.arm(self.arm) if not self.holds(r)]

    def unmet(self, unit: Unit) -> str | None:
        """None when every run of the arm meets it, else the reason, e.g. "needs the loss
        SimCLR (these runs: loss dcl)"."""
        failing = self.failing(unit)
        if not failing:
            return None
        found = sorted({self.found(r) for r in failing}) if self.found is not None else []
        return f"needs {self.requires}" + (f" (here: {', '.join(found)})" if found else "")

    def short(self, unit: Unit) -> str:
        """The reason in a summary line: "needs ..." for a condition on the config, what the
        failing runs show ("here: not converged: ...") for one with a ``summary``."""
        if self.summary is not None:
            failing = self.failing(unit)
            if failing:
                return f"here: {self.summary(failing)}"
        return f"needs {self.requires}"


@dataclass(frozen=True)
class Metric:
    """What a claim measures on each run: ``read`` gives the value (None: not measured);
    ``log`` analyses it as ln(value) (a variance, a spread); ``unit`` says how raw values print
    ("share" and "accuracy" as percentages); ``run_se`` is the sampling error of one run's
    value on the analysis scale (from its analysed images), for claims about one trained
    model, and ``run_se_text`` how it is made. ``step`` is the grid a run's value is counted
    on (1/N for an accuracy on N test images, 1/pairs for a share of pairs; None: continuous):
    its rounding is the floor of any spread over seeds (:meth:`floor`)."""

    name: str
    read: Callable[[RunData], float | None] = field(repr=False, compare=False)
    log: bool = False
    unit: str = "value"
    run_se: Callable[[RunData], float] | None = field(default=None, repr=False, compare=False)
    run_se_text: str = ""
    step: Callable[[RunData], float | None] | None = field(default=None, repr=False, compare=False)

    def floor(self, runs: Sequence[RunData]) -> float:
        """The smallest standard deviation these runs' values can show over seeds: the
        rounding of the coarsest grid among them, step/√12
        (:func:`cl_diag.measurement.stats.rounding_sd`); 0 for a continuous statistic (or one
        analysed on a log scale). The same floor ``cl-diag reproduce`` gives a grid statistic."""
        if self.step is None or self.log:
            return 0.0
        steps = [x for r in runs if (x := self.step(r)) is not None and math.isfinite(x)]
        return rounding_sd(max(steps, default=0.0))

    def value(self, run: RunData) -> float | None:
        """The run's value on the analysis scale (None when absent, or not positive on a log
        scale)."""
        x = self.read(run)
        if x is None or not math.isfinite(x):
            return None
        if self.log:
            return math.log(x) if x > 0 else None
        return float(x)

    def show(self, x: float | None) -> str:
        """A raw value as a report prints it."""
        if x is None:
            return MISSING
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * x:.4g} %"
        return fmt(float(x))

    def show_difference(self, d: float) -> str:
        """A difference of two runs' values on the analysis scale as text: a relative change
        for a log metric, percentage points for a share or an accuracy, else a number."""
        if self.log:
            return f"{100.0 * math.expm1(d):+.3g} %" if d < 709.0 else "+∞ %"
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * d:+.3g} pp"
        return f"{d:+.3g}"

    def spread(self, runs: Sequence[RunData]) -> str:
        """'mean ± sd' of the runs' raw values, or the one value."""
        values = [float(v) for r in runs if (v := self.read(r)) is not None]
        if not values:
            return MISSING
        s = summarize(values)
        if s.sd is None:
            return self.show(s.mean)
        if self.unit in ("share", "accuracy"):
            return f"{100.0 * s.mean:.4g} % ± {100.0 * s.sd:.2g}"
        return f"{fmt(s.mean)} ± {fmt(s.sd, 2)}"


@dataclass(frozen=True)
class Unit:
    """The runs one test is about: ``subject`` names them (config labels); ``runs`` are all of
    them; a paired design's ``control`` and ``treatment`` arms; a paired trend's ``levels``
    (x, control, treatment)."""

    subject: str
    runs: tuple[RunData, ...]
    control: tuple[RunData, ...] = ()
    treatment: tuple[RunData, ...] = ()
    levels: tuple[tuple[float, tuple[RunData, ...], tuple[RunData, ...]], ...] = ()

    def arm(self, which: str) -> tuple[RunData, ...]:
        if which == "control":
            return self.control or self.runs
        if which == "treatment":
            return self.treatment or self.runs
        return self.runs


@dataclass(frozen=True)
class Estimate:
    """A claim's effect on a unit, on the analysis scale: ``effect`` with its standard error
    ``se`` and ``df`` degrees of freedom (se None: no interval, ``why_no_interval`` says why),
    the ``n`` replicates behind it (``replicate`` says of what), how it was made (``method``),
    what was measured (``measured``, ``data``), and for the power figure the design
    (``power_design``: "one_sample", "two_sample", "slope"), the replicate spread ``sd``, the
    x ``levels`` of a slope and the ``seeds`` per condition (or level) now; ``per_seed`` the
    effect of each seed alone on the analysis scale (a paired difference, or a deviation from
    the reference), in seed order, when the replicates are seeds."""

    effect: float | None
    se: float | None
    df: float
    n: int
    replicate: str
    method: str
    measured: str
    data: tuple[tuple[str, float | None], ...] = ()
    power_design: str | None = None
    sd: float | None = None
    levels: tuple[float, ...] = ()
    seeds: int | None = None
    why_no_interval: str = ""
    per_seed: tuple[float, ...] = ()
    #: the interval at a confidence, for an estimate whose interval is not effect ± t se (a
    #: profile-likelihood interval); then ``se`` is its 95 % half-width over t_{0.975, df},
    #: for the Holm ordering and the replication odds only
    interval_at: Callable[[float], tuple[float, float]] | None = field(
        default=None, repr=False, compare=False
    )
    #: why no seed count for 80 % power is given (an estimate without a power design)
    why_no_power: str = ""
