"""The entries of the registry: :class:`Claim` (a prediction, which gets a verdict, or a
description, which gets an estimate) with its :class:`Precondition`, and :class:`Identity`
(a consistency check that holds for any unit vectors).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from cl_diag.report.claims.designs import Design
from cl_diag.report.claims.facts import LayerPairs
from cl_diag.report.claims.schema import Condition, Estimate, Metric, Source, Unit
from cl_diag.report.document import MISSING


@dataclass(frozen=True)
class Precondition:
    """A requirement on the data of a unit for the claim to be testable there: ``requires``
    in words (the docs), ``unmet`` the reason the unit fails it (None: met); a unit that fails
    it is *not applicable here*, never contradicted."""

    requires: str
    unmet: Callable[[Unit, Estimate], str | None] = field(repr=False, compare=False)


#: how a claim's effect is printed: exp(x) − 1 as a percentage, exp(x) as a factor, x as
#: percentage points, x as a number
SHOWS = ("relative", "factor", "pp", "number")
KINDS = ("prediction", "description")


@dataclass(frozen=True)
class Claim:
    """One claim of the registry. A *prediction* gets a verdict; a *description* (a quantity
    no source predicts for these runs) only its estimate and interval.

    ``statement`` says the claim; ``source`` where it is made; ``domain`` which runs it is
    about at all (units whose runs fail it are left out silently: the claim does not speak of
    them); ``scope`` the source's scope (a unit failing it is *not applicable*, with the
    reason), ``at_scope`` what that scope, "tuned" and the like mean operationally; ``metric``
    and ``design`` what is measured and how the runs are compared; ``expect`` the expected
    direction ("increase", "decrease", "agree"); ``margin`` the minimum relevant effect on
    the analysis scale, ``margin_text`` it as printed and ``margin_why`` its one-line
    justification; ``effect`` says what the effect is, ``shows`` how it prints;
    ``precondition`` a requirement on the data (*not applicable here* when unmet);
    ``figure`` the key of the figure that carries it.

    A directional claim has four outcomes (:func:`~cl_diag.report.claims.inference.verdict`): beyond
    the *claimed size* (``claimed``, the number the source gives on the analysis scale; by
    default the margin) it is supported, wholly short of it not borne out, beyond the margin
    the other way contradicted. ``arm_margin`` gives a unit its own margin where the source's
    size differs between the arms a unit can hold (e.g. Table 1's rows with and without VRN);
    ``claimed_text`` says the claimed size as printed when it is not the margin."""

    key: str
    statement: str
    source: Source
    kind: str
    metric: Metric
    design: Design
    effect: str
    shows: str
    expect: str | None = None
    margin: float | None = None
    margin_text: str = ""
    margin_why: str = ""
    domain: tuple[Condition, ...] = ()
    scope: tuple[Condition, ...] = ()
    at_scope: str = ""
    precondition: Precondition | None = None
    figure: str | None = None
    claimed: float | None = None
    claimed_text: str = ""
    arm_margin: Callable[[Unit], tuple[float, str] | None] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.key}: kind must be one of {KINDS}")
        if self.shows not in SHOWS:
            raise ValueError(f"{self.key}: shows must be one of {SHOWS}")
        if self.kind == "prediction" and (
            self.expect is None or self.margin is None or not self.margin > 0
        ):
            raise ValueError(f"{self.key}: a prediction needs an expectation and a margin > 0")
        if self.claimed is not None and (
            self.expect not in ("increase", "decrease")
            or self.margin is None
            or not self.claimed > -self.margin
        ):
            raise ValueError(
                f"{self.key}: a claimed size is for a directional claim, above −margin"
            )

    def margin_for(self, unit: Unit | None) -> tuple[float, str]:
        """The margin (analysis scale) and its text for one unit: the arm's own where the
        claim gives one (``arm_margin``), else the claim's."""
        if self.arm_margin is not None and unit is not None:
            own = self.arm_margin(unit)
            if own is not None:
                return own
        if self.margin is None:
            raise ValueError(f"{self.key}: a description has no margin")
        return self.margin, self.margin_text

    def claimed_for(self, unit: Unit | None) -> float | None:
        """The claimed size for one unit: the claim's ``claimed``, else the unit's margin
        (None for an agreement or a description)."""
        if self.expect not in ("increase", "decrease") or self.margin is None:
            return None
        return self.claimed if self.claimed is not None else self.margin_for(unit)[0]

    @property
    def title(self) -> str:
        return self.statement

    @property
    def minimum(self) -> float | None:
        """The minimum relevant effect on the analysis scale (the margin)."""
        return self.margin

    def display(self, x: float | None) -> float | None:
        """An effect (or interval end) on the analysis scale as it is printed."""
        if x is None or not math.isfinite(x):
            return x
        if self.shows in ("relative", "factor"):
            # a ratio beyond float range (an interval from a near-zero variance) is infinite
            grown = math.exp(x) if x < 709.0 else math.inf
            return grown - 1.0 if self.shows == "relative" and x < 709.0 else grown
        return x

    def show(self, x: float | None, *, sign: bool = True) -> str:
        """An effect on the analysis scale as text ("-63.2 %", "2.7×", "+1.2 pp", "0.031")."""
        value = self.display(x)
        if value is None or math.isnan(value):
            return MISSING
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        spec = "+.4g" if sign else ".4g"
        if self.shows == "relative":
            return f"{100.0 * value:{spec}} %"
        if self.shows == "factor":
            return f"{value:.4g}×"
        if self.shows == "pp":
            return f"{100.0 * value:{spec}} pp"
        return f"{value:{spec}}"


@dataclass(frozen=True)
class Identity:
    """A consistency check: an inequality that holds for any unit vectors (``formula``), so
    a measurement that breaks it beyond ``error`` (float rounding in exact mode, the sampling
    error of sampled pairs) has a bug. ``slack`` is its left side minus its right side on one
    layer's pair moments (>= 0), None when the layer lacks what it needs."""

    key: str
    statement: str
    source: Source
    formula: str
    slack: Callable[[LayerPairs], float | None] = field(repr=False, compare=False)
    error: Callable[[LayerPairs], float] = field(repr=False, compare=False)
    kind: str = "consistency"

    @property
    def title(self) -> str:
        return self.statement
