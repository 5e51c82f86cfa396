"""The typed result model: what ``cl-diag analyze`` measured, as dataclasses.

result.json is the contract between measuring and reporting (docs/result-schema.md).
This module is its one home: the schema version, the pair types, the quantile levels,
the layer names, the metric tables that the reports, ``compare`` and the CLI summary
print, and one validating :func:`load` and one :func:`save`. Nobody else spells a result
key path; readers use the typed fields::

    >>> from cl_diag.result import load                                   # doctest: +SKIP
    >>> res = load("out/result.json")                                     # doctest: +SKIP
    >>> res.layers["embedding"].pairs["cross_view_negative"].excessive_ratio  # doctest: +SKIP
    0.5731
    >>> res.to_frame().head()                                             # doctest: +SKIP

Measurement produces the blocks as plain dicts (``pair_statistics``, ``geometry``,
``theory_panel``, the probes); orchestration parses them into a :class:`Result`, whose
:meth:`Result.to_json` writes the bytes the tool has always written for that content
(keys in schema order, floats as Python's shortest repr, NaN/Inf as null).

Reading accepts every result the tool writes under schema ``cl-diag/result/1``. Keys a
newer writer may add inside a block are kept in that block's ``extra`` and written back
after the known keys, so an older reader neither crashes on them nor drops them; a change
of meaning bumps :data:`SCHEMA`, and a file of another schema is refused with a message
saying what to do.
"""

from __future__ import annotations

import json
import math
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cl_diag.errors import UserError
from cl_diag.io.output import dumps_json

if TYPE_CHECKING:  # pandas is imported by to_frame only
    import pandas as pd

__all__ = [
    "BASELINES",
    "COLLAPSE_METRICS",
    "EMBEDDING_LAYER",
    "GEOMETRY_METRICS",
    "LAYERS",
    "NEGATIVE_TYPES",
    "PAIR_METRICS",
    "PAIR_TYPES",
    "PIXELS",
    "PROBE_METRICS",
    "QUANTILES",
    "RESULT_NAME",
    "RETRIEVAL_KS",
    "SCHEMA",
    "Ccem",
    "Ceiling",
    "ClassSplit",
    "ClassVariance",
    "Clustering",
    "Collapse",
    "Commands",
    "Condition",
    "EffectiveRank",
    "Environment",
    "Eq10",
    "FullBatch",
    "Geometry",
    "Histogram",
    "KnnProbe",
    "Layer",
    "LayerCheck",
    "LinearProbe",
    "Metric",
    "PairStats",
    "Predicted",
    "ProbeSet",
    "Probes",
    "Result",
    "Retrieval",
    "SigmoidPanel",
    "Source",
    "Spectrum",
    "SplitSize",
    "Ssem",
    "SsemPredicted",
    "Theory",
    "TheoryLoss",
    "Tool",
    "VarianceBand",
    "ViewValues",
    "is_result_file",
    "load",
    "probe_report_metrics",
    "retrieval_metric",
    "save",
]

#: the schema this version reads and writes; bumped whenever a key changes meaning
SCHEMA = "cl-diag/result/1"
#: the file name ``analyze`` writes into its output folder
RESULT_NAME = "result.json"
#: the three pair types of Lee et al. (ICML 2025), in the order of the result
PAIR_TYPES = ("positive", "cross_view_negative", "within_view_negative")
#: the pair types that carry the excessive-separation ratio and the by-class split
NEGATIVE_TYPES = ("cross_view_negative", "within_view_negative")
#: quantile levels in percent; a pair block's ``quantiles`` maps ``str(level)`` to the value
QUANTILES = (1, 5, 25, 50, 75, 95, 99)
#: the layers a checkpoint analysis can measure, in result order
LAYERS = ("projector", "backbone")
#: the one layer of an embeddings file (and of a toy checkpoint's learned vectors)
EMBEDDING_LAYER = "embedding"
#: the raw-pixel baseline's one retrieval "layer": the baseline of every layer's retrieval
PIXELS = "pixels"
#: the probe baselines, in report order: what training added over pixels and over the init
BASELINES = ("raw_pixels", "random_init")
#: the k of Recall@k that the retrieval probe reports
RETRIEVAL_KS = (1, 5, 10)

_FUTURE_SCHEMA = re.compile(r"cl-diag/result/(\d+)")


# --------------------------------------------------------------------------- reading helpers


@dataclass(frozen=True)
class _At:
    """Where a value sits (the file and the key path inside it), for error messages."""

    where: str
    path: str = ""

    def __truediv__(self, key: object) -> _At:
        return _At(self.where, f"{self.path}.{key}" if self.path else str(key))

    def fail(self, problem: str) -> NoReturn:
        raise UserError(
            f"{self.where} is not a valid cl-diag result: '{self.path}' {problem}. "
            "Re-run `cl-diag analyze` to write it again."
        )

    def obj(self, value: object) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail("is not an object")
        return value

    def req(self, block: Mapping[str, Any], key: str) -> Any:
        if key not in block:
            (self / key).fail("is missing")
        return block[key]

    def number(self, value: object, *, null: bool = True) -> Any:
        # ints stay ints and floats floats: a value is written back exactly as it was read
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail("is not a number")
        return value

    def integer(self, value: object, *, null: bool = True) -> Any:
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail("is not an integer")
        return value

    def flag(self, value: object, *, null: bool = True) -> Any:
        if value is None and null:
            return None
        if not isinstance(value, bool):
            self.fail("is not true or false")
        return value

    def text(self, value: object, *, null: bool = True) -> Any:
        if value is None and null:
            return None
        if not isinstance(value, str):
            self.fail("is not a string")
        return value

    def numbers(self, value: object) -> list[Any]:
        if not isinstance(value, (list, tuple)):
            self.fail("is not a list")
        return [self.number(v) for v in value]


#: the context of a block parsed on its own (measurement output wrapped by orchestration)
_HERE = _At("a result block")


def _rest(block: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The keys of ``block`` this version does not know (kept and written back as they were)."""
    known = set(known)
    return {k: v for k, v in block.items() if k not in known}


def _optional(
    block: Mapping[str, Any], key: str, parse: Callable[[Any, _At], Any], at: _At = _HERE
) -> Any:
    value = block.get(key)
    # an empty block reads as an absent one (the reports show neither)
    return None if value is None or value == {} else parse(value, at / key)


def _emit(out: dict[str, Any], key: str, value: object) -> None:
    """Write a key the tool writes only when it has a value (absent and null read alike)."""
    if value is not None:
        out[key] = value


# --------------------------------------------------------------------------- pair statistics


@dataclass(frozen=True, kw_only=True)
class Histogram:
    """Counts of similarities in ``bins`` equal bins on ``range`` (always [-1, 1])."""

    range: list[float]
    bins: int
    counts: list[int]
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Histogram:
        d = at.obj(d)
        counts = at.req(d, "counts")
        if not isinstance(counts, (list, tuple)):
            (at / "counts").fail("is not a list")
        return cls(
            range=(at / "range").numbers(d.get("range", [-1.0, 1.0])),
            bins=(at / "bins").integer(at.req(d, "bins"), null=False),
            counts=list(counts),
            extra=_rest(d, ("range", "bins", "counts")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"range": self.range, "bins": self.bins, "counts": self.counts, **self.extra}


_PAIR_KEYS = (
    "count",
    "estimate",
    "mean",
    "var",
    "std",
    "min",
    "max",
    "quantiles",
    "quantile_error",
    "histogram",
    "excessive_ratio",
    "excessive_count",
    "by_class",
    "exact",
    "sampling",
)


def _interval(value: object, at: _At) -> list[Any] | None:
    """A [low, high] interval of numbers, or None."""
    if value is None:
        return None
    bounds = at.numbers(value)
    if len(bounds) != 2:
        at.fail("is not a [low, high] interval")
    return bounds


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """How the estimates of a block of ``--pairs moments`` were made: from ``pairs`` pairs
    drawn uniformly (with replacement, seeded), with intervals at ``confidence`` for the
    population's values: ``excessive_ratio`` [low, high] (Wilson score interval) and, per
    quantile level, [low, high] (distribution-free: the order statistics whose ranks bound the
    binomial count of draws below the quantile). None where the sample holds no pair."""

    pairs: int
    confidence: float
    excessive_ratio: list[float] | None
    quantiles: dict[str, list[float] | None]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Sampling:
        d = at.obj(d)
        quantiles = (at / "quantiles").obj(at.req(d, "quantiles"))
        return cls(
            pairs=(at / "pairs").integer(at.req(d, "pairs"), null=False),
            confidence=(at / "confidence").number(at.req(d, "confidence"), null=False),
            excessive_ratio=_interval(d.get("excessive_ratio"), at / "excessive_ratio"),
            quantiles={str(k): _interval(v, at / "quantiles" / k) for k, v in quantiles.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "confidence": self.confidence,
            "excessive_ratio": self.excessive_ratio,
            "quantiles": self.quantiles,
        }


@dataclass(frozen=True, kw_only=True)
class PairStats:
    """Statistics of one pair type's cosine similarities s (docs/result-schema.md).

    ``mean``, ``var`` (population, ddof 0), ``std``, ``min``, ``max`` of s; ``quantiles``
    maps the percent level (``"1"`` ... ``"99"``) to the value, within ``quantile_error``
    of the exact quantile; ``estimate`` marks a sampled result. Negative types add the
    excessive-separation ratio of Lee et al. (ICML 2025), #{s < delta} / count with
    delta = -1/(n_ref - 1), and with labels the same statistics by class (``by_class``).
    Statistics of an empty split (``count`` 0) are None.
    """

    count: int
    estimate: bool
    mean: float | None
    var: float | None
    std: float | None
    min: float | None
    max: float | None
    quantiles: dict[str, float | None]
    quantile_error: float | None
    histogram: Histogram
    excessive_ratio: float | None = None
    #: None only for positives, which have no threshold: the key is then absent
    excessive_count: int | None = None
    by_class: ClassSplit | None = None
    #: ``--pairs moments``: the statistics that are exact although ``estimate`` is true (count,
    #: mean, var, std, over every pair); the others come from the sample ``sampling`` describes
    #: (its ``pairs`` similarities are what ``histogram`` and ``excessive_count`` count)
    exact: tuple[str, ...] | None = None
    sampling: Sampling | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def negative(self) -> bool:
        """True for a negative pair type (it carries the excessive ratio)."""
        return self.excessive_count is not None

    def quantile(self, level: int) -> float | None:
        """The ``level`` percent quantile (``level`` in :data:`QUANTILES`)."""
        return self.quantiles.get(str(level))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> PairStats:
        d = at.obj(d)
        quantiles = (at / "quantiles").obj(at.req(d, "quantiles"))
        negative = "excessive_count" in d or "excessive_ratio" in d
        return cls(
            count=(at / "count").integer(at.req(d, "count"), null=False),
            estimate=(at / "estimate").flag(at.req(d, "estimate"), null=False),
            mean=(at / "mean").number(at.req(d, "mean")),
            var=(at / "var").number(at.req(d, "var")),
            std=(at / "std").number(at.req(d, "std")),
            min=(at / "min").number(at.req(d, "min")),
            max=(at / "max").number(at.req(d, "max")),
            quantiles={str(k): (at / "quantiles" / k).number(v) for k, v in quantiles.items()},
            quantile_error=(at / "quantile_error").number(at.req(d, "quantile_error")),
            histogram=Histogram.from_dict(at.req(d, "histogram"), at / "histogram"),
            excessive_ratio=(at / "excessive_ratio").number(d.get("excessive_ratio"))
            if negative
            else None,
            excessive_count=(at / "excessive_count").integer(
                at.req(d, "excessive_count"), null=False
            )
            if negative
            else None,
            by_class=_optional(d, "by_class", ClassSplit.from_dict, at),
            exact=None
            if d.get("exact") is None
            else tuple((at / "exact" / i).text(k, null=False) for i, k in enumerate(d["exact"])),
            sampling=_optional(d, "sampling", Sampling.from_dict, at),
            extra=_rest(d, _PAIR_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "count": self.count,
            "estimate": self.estimate,
            "mean": self.mean,
            "var": self.var,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "quantiles": self.quantiles,
            "quantile_error": self.quantile_error,
            "histogram": self.histogram.to_dict(),
        }
        if self.negative:
            out["excessive_ratio"] = self.excessive_ratio
            out["excessive_count"] = self.excessive_count
        if self.exact is not None:
            out["exact"] = list(self.exact)
        if self.sampling is not None:
            out["sampling"] = self.sampling.to_dict()
        if self.by_class is not None:
            out["by_class"] = self.by_class.to_dict()
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class ClassSplit:
    """A negative pair type split by label: same-class negatives are instance
    discrimination's false negatives."""

    same_class: PairStats
    different_class: PairStats

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> ClassSplit:
        d = at.obj(d)
        return cls(
            same_class=PairStats.from_dict(at.req(d, "same_class"), at / "same_class"),
            different_class=PairStats.from_dict(
                at.req(d, "different_class"), at / "different_class"
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "same_class": self.same_class.to_dict(),
            "different_class": self.different_class.to_dict(),
        }


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True, kw_only=True)
class ViewValues:
    """One number per view: u (first view) and v (second view)."""

    u: float | None
    v: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> ViewValues:
        d = at.obj(d)
        return cls(u=(at / "u").number(at.req(d, "u")), v=(at / "v").number(at.req(d, "v")))

    def to_dict(self) -> dict[str, Any]:
        return {"u": self.u, "v": self.v}


@dataclass(frozen=True, kw_only=True)
class EffectiveRank(ViewValues):
    """RankMe (Garrido et al., ICML 2023) per view: exp(-sum_k p_k log p_k),
    p_k = sigma_k / ||sigma||_1 + epsilon."""

    epsilon: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> EffectiveRank:
        views = ViewValues.from_dict(d, at)
        return cls(u=views.u, v=views.v, epsilon=(at / "epsilon").number(d.get("epsilon")))

    def to_dict(self) -> dict[str, Any]:
        return {"u": self.u, "v": self.v, "epsilon": self.epsilon}


@dataclass(frozen=True, kw_only=True)
class Spectrum:
    """Eigenvalues of each view's population covariance, descending."""

    u: list[float]
    v: list[float]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Spectrum:
        d = at.obj(d)
        return cls(u=(at / "u").numbers(d.get("u", [])), v=(at / "v").numbers(d.get("v", [])))

    def to_dict(self) -> dict[str, Any]:
        return {"u": self.u, "v": self.v}


@dataclass(frozen=True, kw_only=True)
class Ceiling:
    """Thm 5.2 (Lee et al., ICML 2025): E[s_pos] <= 1 + E[s_neg] + 1/(n_ref - 1)."""

    value: float | None
    below_one: bool | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Ceiling:
        d = at.obj(d)
        return cls(
            value=(at / "value").number(d.get("value")),
            below_one=(at / "below_one").flag(d.get("below_one")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "below_one": self.below_one}


_GEOMETRY_KEYS = (
    "alignment",
    "uniformity",
    "effective_rank",
    "spectrum",
    "frontier_gap",
    "alignment_ceiling",
    "uniformity_sampling",
)


@dataclass(frozen=True, kw_only=True)
class UniformitySampling:
    """``--pairs moments``: the uniformity is estimated from ``pairs`` pairs i != j of each view
    drawn uniformly (seeded); ``u``, ``v``: [low, high] intervals at ``confidence``."""

    pairs: int
    confidence: float
    u: list[float] | None
    v: list[float] | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> UniformitySampling:
        d = at.obj(d)
        return cls(
            pairs=(at / "pairs").integer(at.req(d, "pairs"), null=False),
            confidence=(at / "confidence").number(at.req(d, "confidence"), null=False),
            u=_interval(d.get("u"), at / "u"),
            v=_interval(d.get("v"), at / "v"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "confidence": self.confidence, "u": self.u, "v": self.v}


@dataclass(frozen=True, kw_only=True)
class Geometry:
    """Geometry of a layer's two views (cl_diag.measurement.geometry has every formula):
    alignment E||u_i - v_i||^2 and uniformity log E exp(-2||x_i - x_j||^2) (Wang & Isola
    2020), RankMe effective rank, covariance spectrum, frontier gap (paper-notes 11.2) and
    the Thm 5.2 alignment ceiling."""

    alignment: float | None
    uniformity: ViewValues
    effective_rank: EffectiveRank
    spectrum: Spectrum
    frontier_gap: float | None
    alignment_ceiling: Ceiling
    #: None: the uniformity is exact (every pair); else how it was estimated (moments mode)
    uniformity_sampling: UniformitySampling | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Geometry:
        d = at.obj(d)
        return cls(
            alignment=(at / "alignment").number(at.req(d, "alignment")),
            uniformity=ViewValues.from_dict(at.req(d, "uniformity"), at / "uniformity"),
            effective_rank=EffectiveRank.from_dict(
                at.req(d, "effective_rank"), at / "effective_rank"
            ),
            spectrum=Spectrum.from_dict(at.req(d, "spectrum"), at / "spectrum"),
            frontier_gap=(at / "frontier_gap").number(at.req(d, "frontier_gap")),
            alignment_ceiling=Ceiling.from_dict(
                at.req(d, "alignment_ceiling"), at / "alignment_ceiling"
            ),
            uniformity_sampling=_optional(
                d, "uniformity_sampling", UniformitySampling.from_dict, at
            ),
            extra=_rest(d, _GEOMETRY_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "alignment": self.alignment,
            "uniformity": self.uniformity.to_dict(),
            "effective_rank": self.effective_rank.to_dict(),
            "spectrum": self.spectrum.to_dict(),
            "frontier_gap": self.frontier_gap,
            "alignment_ceiling": self.alignment_ceiling.to_dict(),
        }
        if self.uniformity_sampling is not None:
            out["uniformity_sampling"] = self.uniformity_sampling.to_dict()
        return {**out, **self.extra}


# --------------------------------------------------------------------------- class collapse


@dataclass(frozen=True, kw_only=True)
class ClassVariance:
    """One class of a collapse block: its instances and within-class variance 1 - ||mu_c||^2."""

    count: int | None
    within_class_variance: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> ClassVariance:
        d = at.obj(d)
        return cls(
            count=(at / "count").integer(d.get("count")),
            within_class_variance=(at / "within_class_variance").number(
                d.get("within_class_variance")
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "within_class_variance": self.within_class_variance}


_COLLAPSE_KEYS = (
    "classes",
    "instances",
    "views",
    "balanced",
    "within_class_variance",
    "between_class_variance",
    "total_variance",
    "s_w",
    "s_b",
    "ssem_residual",
    "epsilon",
    "collapsed",
    "per_class",
)


@dataclass(frozen=True, kw_only=True)
class Collapse:
    """Class-collapse diagnostics of a labelled layer (cl_diag.measurement.collapse has every
    formula): within-class variance 1 - ||mu_c||^2 (mean over classes, and ``per_class`` in
    sorted label order), between-class and total variance, s_w (same class, different
    instance) and s_b (different classes) mean similarities, the SSEM identity residual
    1 + (n-1) s_w + n(m-1) s_b (n = instances per class, m = ``classes``; exact for a
    ``balanced`` sample) and ``collapsed`` = within-class variance < ``epsilon``. Exact:
    computed from class sums over every instance, both views."""

    classes: int
    instances: int
    views: int
    balanced: bool
    within_class_variance: float | None
    between_class_variance: float | None
    total_variance: float | None
    s_w: float | None
    s_b: float | None
    ssem_residual: float | None
    epsilon: float | None
    collapsed: bool | None
    per_class: list[ClassVariance]
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Collapse:
        d = at.obj(d)
        per_class = d.get("per_class") or []
        if not isinstance(per_class, list):
            (at / "per_class").fail("is not a list")
        return cls(
            classes=(at / "classes").integer(at.req(d, "classes"), null=False),
            instances=(at / "instances").integer(at.req(d, "instances"), null=False),
            views=(at / "views").integer(d.get("views", 2), null=False),
            balanced=(at / "balanced").flag(d.get("balanced", False), null=False),
            within_class_variance=(at / "within_class_variance").number(
                at.req(d, "within_class_variance")
            ),
            between_class_variance=(at / "between_class_variance").number(
                d.get("between_class_variance")
            ),
            total_variance=(at / "total_variance").number(d.get("total_variance")),
            s_w=(at / "s_w").number(d.get("s_w")),
            s_b=(at / "s_b").number(d.get("s_b")),
            ssem_residual=(at / "ssem_residual").number(d.get("ssem_residual")),
            epsilon=(at / "epsilon").number(d.get("epsilon")),
            collapsed=(at / "collapsed").flag(d.get("collapsed")),
            per_class=[
                ClassVariance.from_dict(c, at / "per_class" / k) for k, c in enumerate(per_class)
            ],
            extra=_rest(d, _COLLAPSE_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "classes": self.classes,
            "instances": self.instances,
            "views": self.views,
            "balanced": self.balanced,
            "within_class_variance": self.within_class_variance,
            "between_class_variance": self.between_class_variance,
            "total_variance": self.total_variance,
            "s_w": self.s_w,
            "s_b": self.s_b,
            "ssem_residual": self.ssem_residual,
            "epsilon": self.epsilon,
            "collapsed": self.collapsed,
            "per_class": [c.to_dict() for c in self.per_class],
            **self.extra,
        }


@dataclass(frozen=True, kw_only=True)
class Layer:
    """One measured layer: n instances of dimension d, its pair statistics by pair type
    (:data:`PAIR_TYPES`), its geometry and, with labels, its class-collapse diagnostics."""

    n: int
    d: int
    pairs: dict[str, PairStats]
    geometry: Geometry
    collapse: Collapse | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Layer:
        d = at.obj(d)
        pairs = (at / "pairs").obj(at.req(d, "pairs"))
        return cls(
            n=(at / "n").integer(at.req(d, "n"), null=False),
            d=(at / "d").integer(at.req(d, "d"), null=False),
            pairs={
                kind: PairStats.from_dict(stats, at / "pairs" / kind)
                for kind, stats in pairs.items()
            },
            geometry=Geometry.from_dict(at.req(d, "geometry"), at / "geometry"),
            collapse=_optional(d, "collapse", Collapse.from_dict, at),
            extra=_rest(d, ("n", "d", "pairs", "geometry", "collapse")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "d": self.d,
            "pairs": {kind: stats.to_dict() for kind, stats in self.pairs.items()},
            "geometry": self.geometry.to_dict(),
        }
        if self.collapse is not None:  # labelled layers only
            out["collapse"] = self.collapse.to_dict()
        out.update(self.extra)
        return out


# --------------------------------------------------------------------------- probes


def _settings(d: Mapping[str, Any], at: _At = _HERE) -> dict[str, Any] | None:
    value = d.get("settings")
    return None if value is None else (at / "settings").obj(value)


@dataclass(frozen=True, kw_only=True)
class LinearProbe:
    """Multinomial logistic regression on L2-normalised features; test top-1 / top-5
    accuracy (fractions) at the validation-chosen weight decay."""

    top1: float | None
    top5: float | None
    weight_decay: float | None = None
    settings: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> LinearProbe:
        d = at.obj(d)
        return cls(
            top1=(at / "top1").number(d.get("top1")),
            top5=(at / "top5").number(d.get("top5")),
            weight_decay=(at / "weight_decay").number(d.get("weight_decay")),
            settings=_settings(d, at),
            extra=_rest(d, ("top1", "top5", "weight_decay", "settings")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"top1": self.top1, "top5": self.top5}
        _emit(out, "weight_decay", self.weight_decay)
        _emit(out, "settings", self.settings)
        out.update(self.extra)
        return out


_K_KEY = re.compile(r"k(\d+)")


@dataclass(frozen=True, kw_only=True)
class KnnProbe:
    """Weighted cosine kNN (InstDisc / solo-learn: votes sum exp(s / T)); test top-1 by k."""

    top1: dict[int, float | None]
    settings: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> KnnProbe:
        d = at.obj(d)
        top1 = {}
        for key, block in d.items():
            match = _K_KEY.fullmatch(key)
            if match and isinstance(block, dict):
                top1[int(match.group(1))] = (at / key / "top1").number(block.get("top1"))
        known = [f"k{k}" for k in top1] + ["settings"]
        return cls(top1=top1, settings=_settings(d, at), extra=_rest(d, known))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"k{k}": {"top1": value} for k, value in self.top1.items()}
        _emit(out, "settings", self.settings)
        out.update(self.extra)
        return out


_RECALL_KEY = re.compile(r"recall_at_(\d+)")


@dataclass(frozen=True, kw_only=True)
class Retrieval:
    """Retrieval of the positive: rank_i = 1 + #{j != i : s_ij >= s_ii} of v_i among all v
    for u_i; Recall@k = (1/n) #{i : rank_i <= k} and the median rank."""

    recall: dict[int, float | None]
    median_rank: float | None = None
    settings: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Retrieval:
        d = at.obj(d)
        recall = {}
        for key, value in d.items():
            match = _RECALL_KEY.fullmatch(key)
            if match:
                recall[int(match.group(1))] = (at / key).number(value)
        known = [f"recall_at_{k}" for k in recall] + ["median_rank", "settings"]
        return cls(
            recall=recall,
            median_rank=(at / "median_rank").number(d.get("median_rank")),
            settings=_settings(d, at),
            extra=_rest(d, known),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"recall_at_{k}": value for k, value in self.recall.items()}
        _emit(out, "median_rank", self.median_rank)
        _emit(out, "settings", self.settings)
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class Clustering:
    """k-means with k = the number of classes; NMI in [0, 1] and ARI in [-1, 1] against labels."""

    nmi: float | None
    ari: float | None
    settings: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Clustering:
        d = at.obj(d)
        return cls(
            nmi=(at / "nmi").number(d.get("nmi")),
            ari=(at / "ari").number(d.get("ari")),
            settings=_settings(d, at),
            extra=_rest(d, ("nmi", "ari", "settings")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nmi": self.nmi, "ari": self.ari}
        _emit(out, "settings", self.settings)
        out.update(self.extra)
        return out


_PROBE_SET_KEYS = ("linear", "knn", "clustering", "retrieval")


@dataclass(frozen=True, kw_only=True)
class ProbeSet:
    """The probes of one representation (trained, or a baseline): each None when not run.
    ``retrieval`` maps the layer (or :data:`PIXELS`) to its retrieval scores."""

    linear: LinearProbe | None = None
    knn: KnnProbe | None = None
    clustering: Clustering | None = None
    retrieval: dict[str, Retrieval] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def recall(self, layer: str, k: int) -> float | None:
        """Recall@k of the retrieval probe on ``layer``; None when not measured."""
        block = (self.retrieval or {}).get(layer)
        return None if block is None else block.recall.get(k)

    @staticmethod
    def _parts(d: Mapping[str, Any], at: _At = _HERE) -> dict[str, Any]:
        retrieval = d.get("retrieval")
        if retrieval is not None:
            retrieval = {
                layer: Retrieval.from_dict(block, at / "retrieval" / layer)
                for layer, block in (at / "retrieval").obj(retrieval).items()
            }
        return {
            "linear": _optional(d, "linear", LinearProbe.from_dict, at),
            "knn": _optional(d, "knn", KnnProbe.from_dict, at),
            "clustering": _optional(d, "clustering", Clustering.from_dict, at),
            "retrieval": retrieval,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> ProbeSet:
        d = at.obj(d)
        return cls(**cls._parts(d, at), extra=_rest(d, _PROBE_SET_KEYS))

    def _emit_parts(self, out: dict[str, Any]) -> None:
        if self.linear is not None:
            out["linear"] = self.linear.to_dict()
        if self.knn is not None:
            out["knn"] = self.knn.to_dict()
        if self.clustering is not None:
            out["clustering"] = self.clustering.to_dict()
        if self.retrieval is not None:
            out["retrieval"] = {layer: block.to_dict() for layer, block in self.retrieval.items()}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self._emit_parts(out)
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class SplitSize:
    """How many images of an evaluation split the probes used, of how many."""

    images: int | None
    of: int | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> SplitSize:
        d = at.obj(d)
        return cls(
            images=(at / "images").integer(d.get("images")), of=(at / "of").integer(d.get("of"))
        )

    def to_dict(self) -> dict[str, Any]:
        return {"images": self.images, "of": self.of}


@dataclass(frozen=True, kw_only=True)
class Probes(ProbeSet):
    """The probes of the trained representation on ``layer`` features (retrieval on the
    layers it names), the evaluation splits used, and the baselines by name
    (:data:`BASELINES`)."""

    layer: str = "backbone"
    splits: dict[str, SplitSize] | None = None
    baselines: dict[str, ProbeSet] | None = None
    #: probes asked for that could not run on the data, each with the reason (e.g. the train
    #: split holds a single class); None when every probe asked for ran
    skipped: dict[str, str] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Probes:
        d = at.obj(d)
        splits = d.get("splits")
        if splits is not None:
            splits = {
                k: SplitSize.from_dict(v, at / "splits" / k)
                for k, v in (at / "splits").obj(splits).items()
            }
        baselines = d.get("baselines")
        if baselines is not None:
            baselines = {
                k: ProbeSet.from_dict(v, at / "baselines" / k)
                for k, v in (at / "baselines").obj(baselines).items()
            }
        skipped = d.get("skipped")
        if skipped is not None:
            skipped = {
                k: (at / "skipped" / k).text(v, null=False)
                for k, v in (at / "skipped").obj(skipped).items()
            }
        return cls(
            layer=(at / "layer").text(d.get("layer", "backbone"), null=False),
            splits=splits,
            baselines=baselines,
            skipped=skipped,
            **cls._parts(d, at),
            extra=_rest(d, ("layer", "splits", "baselines", "skipped", *_PROBE_SET_KEYS)),
        )

    def baseline(self, name: str) -> ProbeSet | None:
        return (self.baselines or {}).get(name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layer": self.layer}
        if self.splits is not None:
            out["splits"] = {k: v.to_dict() for k, v in self.splits.items()}
        self._emit_parts(out)
        if self.baselines is not None:
            out["baselines"] = {k: v.to_dict() for k, v in self.baselines.items()}
        if self.skipped is not None:
            out["skipped"] = dict(self.skipped)
        out.update(self.extra)
        return out


# --------------------------------------------------------------------------- theory


@dataclass(frozen=True, kw_only=True)
class TheoryLoss:
    """The training loss in the paper's framework: Def. 3.1 (``info_nce``) or Def. 3.2
    (``independently_additive``) with coefficients (c1, c2)."""

    name: str | None
    family: str | None
    c1: float | None
    c2: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> TheoryLoss:
        d = at.obj(d)
        return cls(
            name=(at / "name").text(d.get("name")),
            family=(at / "family").text(d.get("family")),
            c1=(at / "c1").number(d.get("c1")),
            c2=(at / "c2").number(d.get("c2")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "c1": self.c1, "c2": self.c2}


@dataclass(frozen=True, kw_only=True)
class Predicted:
    """The full-batch optimum's mean positive and negative similarity (Thm 5.1: 1, -1/(n-1))."""

    positive_mean: float | None
    negative_mean: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Predicted:
        d = at.obj(d)
        return cls(
            positive_mean=(at / "positive_mean").number(d.get("positive_mean")),
            negative_mean=(at / "negative_mean").number(d.get("negative_mean")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"positive_mean": self.positive_mean, "negative_mean": self.negative_mean}


@dataclass(frozen=True, kw_only=True)
class VarianceBand:
    """Thm 5.5, Eq. 11: Var[s_neg] in [(n-m)/((m-1)(n-1)^2), n(n-m)/((m-1)(n-1)^2)]."""

    n: int | None
    m: int | None
    lo: float | None
    hi: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> VarianceBand:
        d = at.obj(d)
        return cls(
            n=(at / "n").integer(d.get("n")),
            m=(at / "m").integer(d.get("m")),
            lo=(at / "lo").number(d.get("lo")),
            hi=(at / "hi").number(d.get("hi")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "m": self.m, "lo": self.lo, "hi": self.hi}


@dataclass(frozen=True, kw_only=True)
class Eq10:
    """Example 5.4, Eq. 10: (1 + e^{t/(N-1)+b}) / (1 + e^{t-b}) < (N-2)/2 predicts
    excessive separation for the cross-view-only sigmoid loss."""

    N: int | None
    lhs: float | None
    rhs: float | None
    holds: bool | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Eq10:
        d = at.obj(d)
        return cls(
            N=(at / "N").integer(d.get("N")),
            lhs=(at / "lhs").number(d.get("lhs")),
            rhs=(at / "rhs").number(d.get("rhs")),
            holds=(at / "holds").flag(d.get("holds")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        _emit(out, "N", self.N)
        out.update(lhs=self.lhs, rhs=self.rhs, holds=self.holds)
        return out


@dataclass(frozen=True, kw_only=True)
class Ccem:
    """The constant-embedding-model optimum of the sigmoid loss (paper-notes 11.1):
    s_pos = 2x* - 1, s_neg = x* (N-2)/(N-1) - 1."""

    N: int | None
    x_star: float | None
    s_pos: float | None
    s_neg: float | None
    regime: str | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Ccem:
        d = at.obj(d)
        return cls(
            N=(at / "N").integer(d.get("N")),
            x_star=(at / "x_star").number(d.get("x_star")),
            s_pos=(at / "s_pos").number(d.get("s_pos")),
            s_neg=(at / "s_neg").number(d.get("s_neg")),
            regime=(at / "regime").text(d.get("regime")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "N": self.N,
            "x_star": self.x_star,
            "s_pos": self.s_pos,
            "s_neg": self.s_neg,
            "regime": self.regime,
        }


@dataclass(frozen=True, kw_only=True)
class SigmoidPanel:
    """The sigmoid loss's temperature t and bias b (paper sign, b = -b_SigLIP), Eq. 10 and
    the CCEM optimum at N = m."""

    t: float | None
    b: float | None
    eq10: Eq10
    ccem: Ccem

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> SigmoidPanel:
        d = at.obj(d)
        return cls(
            t=(at / "t").number(d.get("t")),
            b=(at / "b").number(d.get("b")),
            eq10=Eq10.from_dict(d.get("eq10") or {}, at / "eq10"),
            ccem=Ccem.from_dict(d.get("ccem") or {}, at / "ccem"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "b": self.b, "eq10": self.eq10.to_dict(), "ccem": self.ccem.to_dict()}


@dataclass(frozen=True, kw_only=True)
class Condition:
    """Thm 5.1 (iii) against Thm 5.3 (8) for a Def. 3.2 loss with (c1, c2) = (1, 0):
    phi'(1) against rhs = ((N-2)/(2(N-1))) psi'(-1/(N-1))."""

    N: int | None
    dphi_at_1: float | None
    rhs: float | None
    verdict: str | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Condition:
        d = at.obj(d)
        return cls(
            N=(at / "N").integer(d.get("N")),
            dphi_at_1=(at / "dphi_at_1").number(d.get("dphi_at_1")),
            rhs=(at / "rhs").number(d.get("rhs")),
            verdict=(at / "verdict").text(d.get("verdict")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"N": self.N, "dphi_at_1": self.dphi_at_1, "rhs": self.rhs, "verdict": self.verdict}


@dataclass(frozen=True, kw_only=True)
class LayerCheck:
    """Per layer: the Thm 5.2 ceiling beside the measured positive mean, and the validity
    caveats: d < n_ref - 1 (no simplex fits) and d < m - 1 (not even per batch)."""

    d: int | None
    alignment_ceiling: float | None
    positive_mean: float | None
    caveat: bool
    d_below_m_minus_1: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> LayerCheck:
        d = at.obj(d)
        return cls(
            d=(at / "d").integer(d.get("d")),
            alignment_ceiling=(at / "alignment_ceiling").number(d.get("alignment_ceiling")),
            positive_mean=(at / "positive_mean").number(d.get("positive_mean")),
            caveat=(at / "caveat").flag(d.get("caveat", False), null=False),
            d_below_m_minus_1=(at / "d_below_m_minus_1").flag(
                d.get("d_below_m_minus_1", False), null=False
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "alignment_ceiling": self.alignment_ceiling,
            "positive_mean": self.positive_mean,
            "caveat": self.caveat,
            "d_below_m_minus_1": self.d_below_m_minus_1,
        }


@dataclass(frozen=True, kw_only=True)
class FullBatch:
    """The theory panel's N-dependent entries evaluated for the full batch, N = n_ref (the
    top-level ones take one fixed mini-batch, N = m): which theorem applies (Thm 5.1 (iii) or
    Thm 5.3 for a Def. 3.2 loss with (c1, c2) = (1, 0)), its predicted means, the condition,
    and for the sigmoid loss Eq. 10 and the CCEM optimum at N = n_ref."""

    N: int | None
    theorem: str | None
    predicted: Predicted
    condition: Condition | None = None
    eq10: Eq10 | None = None
    ccem: Ccem | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> FullBatch:
        d = at.obj(d)
        sigmoid = (at / "sigmoid").obj(d.get("sigmoid") or {})
        return cls(
            N=(at / "N").integer(d.get("N")),
            theorem=(at / "theorem").text(d.get("theorem")),
            predicted=Predicted.from_dict(d.get("predicted") or {}, at / "predicted"),
            condition=_optional(d, "condition", Condition.from_dict, at),
            eq10=_optional(sigmoid, "eq10", Eq10.from_dict, at / "sigmoid"),
            ccem=_optional(sigmoid, "ccem", Ccem.from_dict, at / "sigmoid"),
            extra=_rest(d, ("N", "theorem", "predicted", "condition", "sigmoid")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "N": self.N,
            "theorem": self.theorem,
            "predicted": self.predicted.to_dict(),
        }
        if self.condition is not None:
            out["condition"] = self.condition.to_dict()
        if self.eq10 is not None or self.ccem is not None:
            sigmoid: dict[str, Any] = {}
            if self.eq10 is not None:
                sigmoid["eq10"] = self.eq10.to_dict()
            if self.ccem is not None:
                sigmoid["ccem"] = self.ccem.to_dict()
            out["sigmoid"] = sigmoid
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class SsemPredicted:
    """The SSEM optimum's same-class and between-class similarities and within-class variance."""

    s_w: float | None
    s_b: float | None
    within_class_variance: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> SsemPredicted:
        d = at.obj(d)
        return cls(
            s_w=(at / "s_w").number(d.get("s_w")),
            s_b=(at / "s_b").number(d.get("s_b")),
            within_class_variance=(at / "within_class_variance").number(
                d.get("within_class_variance")
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "s_w": self.s_w,
            "s_b": self.s_b,
            "within_class_variance": self.within_class_variance,
        }


_SSEM_KEYS = (
    "alpha",
    "tau",
    "m",
    "n",
    "p",
    "variant",
    "alpha_c",
    "beta_star",
    "regime",
    "predicted",
    "d_below_mn_minus_1",
    "small_alpha",
)


@dataclass(frozen=True, kw_only=True)
class Ssem:
    """The simplex-to-simplex embedding model of a ``supcl`` run (paper-notes 11.3;
    cl_diag.measurement.theory.ssem_panel): on the balanced batch of m classes x n instances
    x p views at temperature tau, the collapse threshold alpha_c and the optimum beta* (1:
    class collapse) with its predicted s_w, s_b and within-class variance 1 - beta*; caveats
    ``d_below_mn_minus_1`` (the model needs d >= mn - 1) and ``small_alpha`` (alpha <= 0.1 at
    tau <= 0.1, where variant B left the model in free optimisation)."""

    alpha: float | None
    tau: float | None
    m: int | None
    n: int | None
    p: int | None
    variant: str | None
    alpha_c: float | None
    beta_star: float | None
    regime: str | None
    predicted: SsemPredicted
    d_below_mn_minus_1: bool
    small_alpha: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Ssem:
        d = at.obj(d)
        return cls(
            alpha=(at / "alpha").number(d.get("alpha")),
            tau=(at / "tau").number(d.get("tau")),
            m=(at / "m").integer(d.get("m")),
            n=(at / "n").integer(d.get("n")),
            p=(at / "p").integer(d.get("p")),
            variant=(at / "variant").text(d.get("variant")),
            alpha_c=(at / "alpha_c").number(d.get("alpha_c")),
            beta_star=(at / "beta_star").number(d.get("beta_star")),
            regime=(at / "regime").text(d.get("regime")),
            predicted=SsemPredicted.from_dict(d.get("predicted") or {}, at / "predicted"),
            d_below_mn_minus_1=(at / "d_below_mn_minus_1").flag(
                d.get("d_below_mn_minus_1", False), null=False
            ),
            small_alpha=(at / "small_alpha").flag(d.get("small_alpha", False), null=False),
            extra=_rest(d, _SSEM_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "tau": self.tau,
            "m": self.m,
            "n": self.n,
            "p": self.p,
            "variant": self.variant,
            "alpha_c": self.alpha_c,
            "beta_star": self.beta_star,
            "regime": self.regime,
            "predicted": self.predicted.to_dict(),
            "d_below_mn_minus_1": self.d_below_mn_minus_1,
            "small_alpha": self.small_alpha,
            **self.extra,
        }


_THEORY_KEYS = (
    "n_ref",
    "batch_size",
    "loss",
    "theorem",
    "statement",
    "predicted",
    "variance_band",
    "within_batch_optimum",
    "sigmoid",
    "loss_layer",
    "condition",
    "full_batch",
    "ssem",
    "layers",
)


@dataclass(frozen=True, kw_only=True)
class Theory:
    """The theory panel (cl_diag.measurement.theory.theory_panel): which theorem of Lee et
    al. (ICML 2025) applies to the run's loss and what it predicts, with per-layer checks."""

    n_ref: int | None
    batch_size: int | None
    loss: TheoryLoss
    theorem: str | None
    statement: str
    predicted: Predicted
    variance_band: VarianceBand | None = None
    within_batch_optimum: float | None = None
    sigmoid: SigmoidPanel | None = None
    #: the layer the loss is computed on, which the theorems describe (None: every layer)
    loss_layer: str | None = None
    condition: Condition | None = None
    #: the N-dependent entries for the full batch, N = n_ref (absent when N = m gives the same)
    full_batch: FullBatch | None = None
    #: supcl runs with balanced batches: the SSEM collapse threshold and optimum
    ssem: Ssem | None = None
    layers: dict[str, LayerCheck] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def N(self) -> int | None:
        """The number of pairs the top-level theorem, condition and sigmoid entries were
        evaluated at: one fixed mini-batch (N = m) when m >= 3, else n_ref."""
        for block in (
            self.condition,
            self.sigmoid.ccem if self.sigmoid else None,
            self.sigmoid.eq10 if self.sigmoid else None,
        ):
            if block is not None and block.N is not None:
                return block.N
        if self.batch_size is not None and self.batch_size >= 3:
            return self.batch_size
        return self.n_ref

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Theory:
        d = at.obj(d)
        layers = d.get("layers")
        if layers is not None:
            layers = {
                k: LayerCheck.from_dict(v, at / "layers" / k)
                for k, v in (at / "layers").obj(layers).items()
            }
        return cls(
            n_ref=(at / "n_ref").integer(d.get("n_ref")),
            batch_size=(at / "batch_size").integer(d.get("batch_size")),
            loss=TheoryLoss.from_dict(d.get("loss") or {}, at / "loss"),
            theorem=(at / "theorem").text(d.get("theorem")),
            statement=(at / "statement").text(d.get("statement", ""), null=False),
            predicted=Predicted.from_dict(d.get("predicted") or {}, at / "predicted"),
            variance_band=_optional(d, "variance_band", VarianceBand.from_dict, at),
            within_batch_optimum=(at / "within_batch_optimum").number(
                d.get("within_batch_optimum")
            ),
            sigmoid=_optional(d, "sigmoid", SigmoidPanel.from_dict, at),
            loss_layer=(at / "loss_layer").text(d.get("loss_layer")),
            condition=_optional(d, "condition", Condition.from_dict, at),
            full_batch=_optional(d, "full_batch", FullBatch.from_dict, at),
            ssem=_optional(d, "ssem", Ssem.from_dict, at),
            layers=layers,
            extra=_rest(d, _THEORY_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_ref": self.n_ref,
            "batch_size": self.batch_size,
            "loss": self.loss.to_dict(),
            "theorem": self.theorem,
            "statement": self.statement,
            "predicted": self.predicted.to_dict(),
            "variance_band": None if self.variance_band is None else self.variance_band.to_dict(),
            "within_batch_optimum": self.within_batch_optimum,
            "sigmoid": None if self.sigmoid is None else self.sigmoid.to_dict(),
            "loss_layer": self.loss_layer,
        }
        if self.condition is not None:
            out["condition"] = self.condition.to_dict()
        if self.full_batch is not None:
            out["full_batch"] = self.full_batch.to_dict()
        if self.ssem is not None:
            out["ssem"] = self.ssem.to_dict()
        if self.layers is not None:
            out["layers"] = {k: v.to_dict() for k, v in self.layers.items()}
        out.update(self.extra)
        return out


# --------------------------------------------------------------------------- environment, commands
# Issue 22 (reproduction): the environment fingerprint a result (and a checkpoint) was made under,
# and the resolved commands that made it, so that `cl-diag reproduce` re-runs them exactly.

_ENVIRONMENT_KEYS = (
    "cpu",
    "threads",
    "device",
    "cuda",
    "libraries",
    "builds",
    "flags",
    "variables",
)


@dataclass(frozen=True, kw_only=True)
class Environment:
    """The environment fingerprint (:func:`cl_diag.environment.fingerprint`): CPU model and the
    ATen CPU capability used, threads and workers, the device (and GPU, driver, cuDNN), library
    versions and builds, determinism and TF32 flags, and the relevant environment variables.
    Equal fingerprints promise equal bytes (docs/reproducibility.md)."""

    cpu: dict[str, Any] = field(default_factory=dict)
    threads: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    cuda: dict[str, Any] | None = None
    libraries: dict[str, Any] = field(default_factory=dict)
    builds: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Environment:
        d = at.obj(d)
        blocks = {
            key: (at / key).obj(d[key])
            for key in ("cpu", "threads", "libraries", "builds", "flags", "variables")
            if key in d
        }
        cuda = d.get("cuda")
        return cls(
            **blocks,
            device=(at / "device").text(d.get("device")),
            cuda=None if cuda is None else (at / "cuda").obj(cuda),
            extra=_rest(d, _ENVIRONMENT_KEYS),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in _ENVIRONMENT_KEYS}
        out.update(self.extra)
        return out

    def differences(self, other: Environment | None) -> list[str]:
        """The dotted fields on which ``other`` differs (``threads.intra_op``, ...)."""
        from cl_diag.environment import differences

        return differences(self.to_dict(), None if other is None else other.to_dict())


@dataclass(frozen=True, kw_only=True)
class Commands:
    """The resolved commands that made a result: ``analyze`` (every option of the analysis, as
    run) and ``train`` (the training options a cl-diag checkpoint records, None for any other
    input). ``cl-diag reproduce`` re-runs them; nothing is guessed."""

    analyze: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Commands:
        d = at.obj(d)
        analyze, train = d.get("analyze"), d.get("train")
        return cls(
            analyze=None if analyze is None else (at / "analyze").obj(analyze),
            train=None if train is None else (at / "train").obj(train),
            extra=_rest(d, ("analyze", "train")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"analyze": self.analyze, "train": self.train, **self.extra}


# --------------------------------------------------------------------------- source and result


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    version: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Tool:
        d = at.obj(d)
        return cls(name=str(d.get("name", "cl-diag")), version=str(d.get("version", "")))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


_SOURCE_FIELDS = (
    "kind",
    "path",
    "sha256",
    "weights_sha256",
    "format",
    "arch",
    "dataset",
    "n_train",
    "epoch",
    "step",
    "global_step",
    "complete",
    "cifar_stem_padding",
    "views",
    "versions",
    "provenance",
    "environment",
)


@dataclass(frozen=True, kw_only=True)
class Source:
    """What was analysed: ``kind`` "embeddings" (a file, with its ``sha256``), "arrays"
    (given to :func:`cl_diag.measure`: no path, the arrays' ``sha256``) or
    "checkpoint" (``weights_sha256`` of its tensors, its format, arch, dataset, where in
    training it was taken, and how its two ``views`` were made). Other keys a checkpoint
    reader records (projector layout, notes, ...) are in ``extra``."""

    kind: str
    path: str | None = None
    sha256: str | None = None
    weights_sha256: str | None = None
    format: str | None = None
    arch: str | None = None
    dataset: str | None = None
    n_train: int | None = None
    epoch: int | None = None
    step: int | None = None
    global_step: int | None = None
    complete: bool | None = None
    cifar_stem_padding: Any = None  # {"value": int, "from": why}, or a bare int
    views: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    #: the fingerprint of the environment that trained the checkpoint (its last.pt's record)
    environment: Environment | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the keys as they were given, in order: the readers record null values and key order
    #: (which differs between checkpoint formats) and both are written back as given
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], at: _At = _HERE) -> Source:
        d = at.obj(d)
        known = {k: d[k] for k in _SOURCE_FIELDS if k in d}
        known["kind"] = (at / "kind").text(d.get("kind", ""), null=False)
        known["environment"] = _optional(d, "environment", Environment.from_dict, at)
        return cls(**known, extra=_rest(d, _SOURCE_FIELDS), keys=tuple(d))

    def to_dict(self) -> dict[str, Any]:
        values = {k: getattr(self, k) for k in _SOURCE_FIELDS}
        values["environment"] = None if self.environment is None else self.environment.to_dict()
        if self.keys:
            return {k: values[k] if k in values else self.extra[k] for k in self.keys}
        out = {k: v for k, v in values.items() if v is not None or k == "kind"}
        out.update(self.extra)
        return out


_RESULT_KEYS = (
    "schema",
    "tool",
    "source",
    "n_ref",
    "threshold",
    "mode",
    "num_pairs",
    "seed",
    "conventions",
    "config",
    "layers",
    "probes",
    "theory",
    "commands",
    "environment",
)


@dataclass(frozen=True, kw_only=True)
class Result:
    """One ``cl-diag analyze`` result (docs/result-schema.md).

    ``threshold`` is delta = -1/(n_ref - 1), the simplex-ETF similarity of n_ref training
    instances (Thm 5.1) that the excessive ratios count against; ``mode`` "exact" (all
    pairs), "sampled" (``num_pairs`` per type, estimates) or "moments" (exact means and
    variances over all pairs, the rest estimated from ``num_pairs`` per type); ``config``
    the training config of a checkpoint ({} for embeddings). ``probes`` and ``theory`` are
    None for an embeddings file.
    """

    schema: str
    tool: Tool
    source: Source
    n_ref: int
    threshold: float
    mode: str
    num_pairs: int | None
    seed: int | None
    conventions: dict[str, Any]
    config: dict[str, Any]
    layers: dict[str, Layer]
    probes: Probes | None = None
    theory: Theory | None = None
    #: what made this result: the analyze options and, for a cl-diag checkpoint, its training's
    commands: Commands | None = None
    #: the fingerprint of the environment the analysis ran in (the training's: source.environment)
    environment: Environment | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # ---- reading and writing

    @classmethod
    def from_dict(cls, d: object, *, where: str = "the result") -> Result:
        """Check and type a result dict (as read from result.json, or built in memory);
        a problem is a :class:`UserError` naming ``where`` and the fix."""
        if not isinstance(d, dict):
            raise UserError(
                f"{where} holds JSON but not a result object. "
                "Pass the result.json `cl-diag analyze` wrote."
            )
        _check_schema(d.get("schema"), where)
        layers = d.get("layers")
        if (
            not isinstance(layers, dict)
            or not layers
            or not all(isinstance(v, dict) for v in layers.values())
        ):
            raise UserError(
                f"{where} has no measured layers ('layers' is missing or empty). "
                "Re-run `cl-diag analyze`."
            )
        n_ref = d.get("n_ref")
        threshold = d.get("threshold")
        if (
            isinstance(n_ref, bool)
            or not isinstance(n_ref, int)
            or n_ref < 2
            or isinstance(threshold, bool)
            or (not isinstance(threshold, (int, float)))
        ):
            raise UserError(
                f"{where} lacks a valid 'n_ref' (an integer >= 2) and 'threshold'. "
                "Re-run `cl-diag analyze`."
            )
        at = _At(where)
        conventions = d.get("conventions") or {}
        config = d.get("config") or {}
        return cls(
            schema=d["schema"],
            tool=Tool.from_dict(d.get("tool") or {}, at / "tool"),
            source=Source.from_dict(d.get("source") or {}, at / "source"),
            n_ref=n_ref,
            threshold=threshold,
            mode=(at / "mode").text(d.get("mode", "exact"), null=False),
            num_pairs=(at / "num_pairs").integer(d.get("num_pairs")),
            seed=(at / "seed").integer(d.get("seed")),
            conventions=(at / "conventions").obj(conventions),
            config=(at / "config").obj(config),
            layers={
                name: Layer.from_dict(layer, at / "layers" / name) for name, layer in layers.items()
            },
            probes=_optional(d, "probes", Probes.from_dict, at),
            theory=_optional(d, "theory", Theory.from_dict, at),
            commands=_optional(d, "commands", Commands.from_dict, at),
            environment=_optional(d, "environment", Environment.from_dict, at),
            extra=_rest(d, _RESULT_KEYS),
        )

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read and check a result.json (:func:`load`)."""
        return load(path)

    def to_dict(self) -> dict[str, Any]:
        """The result as the JSON object result.json holds, keys in schema order."""
        out: dict[str, Any] = {
            "schema": self.schema,
            "tool": self.tool.to_dict(),
            "source": self.source.to_dict(),
            "n_ref": self.n_ref,
            "threshold": self.threshold,
            "mode": self.mode,
            "num_pairs": self.num_pairs,
            "seed": self.seed,
            "conventions": self.conventions,
            "config": self.config,
            "layers": {name: layer.to_dict() for name, layer in self.layers.items()},
        }
        if self.probes is not None:
            out["probes"] = self.probes.to_dict()
        if self.theory is not None:
            out["theory"] = self.theory.to_dict()
        if self.commands is not None:
            out["commands"] = self.commands.to_dict()
        if self.environment is not None:
            out["environment"] = self.environment.to_dict()
        out.update(self.extra)
        return out

    def to_json(self) -> str:
        """result.json's text: schema key order, shortest float repr, NaN/Inf as null."""
        return dumps_json(self.to_dict())

    def save(self, path: str | Path) -> Path:
        """Write result.json to ``path`` (a folder gets result.json inside); returns the file."""
        return save(self, path)

    # ---- reading values

    @property
    def estimate(self) -> bool:
        """True when (some of) the pair statistics are sampled estimates: ``sampled`` mode, or
        ``moments`` mode (exact means and variances, the rest sampled)."""
        return self.mode in ("sampled", "moments")

    def to_frame(self) -> pd.DataFrame:
        """One tidy row per layer x pair type x statistic.

        Columns ``layer``, ``pair_type``, ``split`` ("all", or "same_class" /
        "different_class" for the by-class statistics of a labelled result),
        ``statistic`` and ``value`` (float; None statistics, e.g. of an empty split, are
        NaN). Statistics: count, mean, var, std, min, max, ``quantile_<level>`` for each
        of :data:`QUANTILES`, quantile_error and, for negative types, excessive_ratio and
        excessive_count.
        """
        import pandas as pd

        rows = []
        for layer_name, layer in self.layers.items():
            for kind, stats in layer.pairs.items():
                parts = [("all", stats)]
                if stats.by_class is not None:
                    parts += [
                        ("same_class", stats.by_class.same_class),
                        ("different_class", stats.by_class.different_class),
                    ]
                for split, part in parts:
                    for statistic, value in _statistics(part):
                        rows.append((layer_name, kind, split, statistic, _float(value)))
        return pd.DataFrame(rows, columns=["layer", "pair_type", "split", "statistic", "value"])


def _statistics(stats: PairStats) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [
        ("count", stats.count),
        ("mean", stats.mean),
        ("var", stats.var),
        ("std", stats.std),
        ("min", stats.min),
        ("max", stats.max),
    ]
    out += [(f"quantile_{level}", stats.quantile(level)) for level in QUANTILES]
    out.append(("quantile_error", stats.quantile_error))
    if stats.negative:
        out += [
            ("excessive_ratio", stats.excessive_ratio),
            ("excessive_count", stats.excessive_count),
        ]
    return out


def _float(value: object) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _check_schema(schema: object, where: str) -> None:
    if schema == SCHEMA:
        return
    newer = isinstance(schema, str) and _FUTURE_SCHEMA.fullmatch(schema)
    if newer and int(newer.group(1)) > int(SCHEMA.rsplit("/", 1)[1]):
        raise UserError(
            f"{where} has schema {schema!r}, newer than this cl-diag reads ({SCHEMA!r}): "
            "a newer cl-diag wrote it. Upgrade cl-diag to read it, or re-run `cl-diag analyze` "
            "with this version to rewrite it."
        )
    found = "no 'schema' key" if schema is None else f"schema {schema!r}"
    raise UserError(
        f"{where} has {found}; this cl-diag reads {SCHEMA!r}. "
        "Re-run `cl-diag analyze` with this version to rewrite it "
        "(results are never converted silently)."
    )


#: the largest result.json :func:`load` reads (a real one is tens to hundreds of kilobytes)
MAX_RESULT_BYTES = 256 << 20


def load(path: str | Path) -> Result:
    """Read and check one result.json (or the folder holding it); every problem is a
    :class:`UserError` naming the file and the fix."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_NAME
    try:
        # a regular file of bounded size only: a FIFO would block for ever, /dev/zero never end
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UserError(
                f"{path} is not a regular file (a device, FIFO or socket?), so not a result.json. "
                "Pass the result.json `cl-diag analyze` wrote, or its folder."
            )
        if info.st_size > MAX_RESULT_BYTES:
            raise UserError(
                f"{path} has {info.st_size:,} bytes, more than any result.json cl-diag writes "
                f"({MAX_RESULT_BYTES:,} at most). Pass the result.json `cl-diag analyze` wrote."
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(
            f"{path} is not a text file, so not a result.json. "
            "Pass the result.json `cl-diag analyze` wrote."
        ) from None
    except OSError as exc:
        raise UserError(
            f"Cannot read {path}: {exc.strerror or exc}. Check the path and its permissions."
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "it may be truncated or not a result file. "
            "Re-run `cl-diag analyze` to write it again."
        ) from None
    return Result.from_dict(data, where=str(path))


#: how every result.json cl-diag writes begins (:func:`dumps_json` of a Result: "schema" first)
_RESULT_START = re.compile(rb'\{\s*"schema":\s*"cl-diag/result/\d+"')


def is_result_file(path: str | Path) -> bool:
    """True when ``path`` is a regular file that begins as every result.json cl-diag writes
    (any schema version). Reads at most its first 64 bytes: a cheap test of whose file it is,
    not a validation (that is :func:`load`)."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            return _RESULT_START.match(handle.read(64)) is not None
    except OSError:
        return False


def save(result: Result, path: str | Path) -> Path:
    """Write ``result`` as result.json to ``path`` (a folder gets ``result.json`` inside)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_NAME
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(result.to_json())
    return path


# --------------------------------------------------------------------------- metric tables


@dataclass(frozen=True)
class Metric:
    """One number the reports, ``compare`` and the CLI summary print.

    ``key`` names the comparison.csv column; ``title`` is the compact title (comparison
    tables, CLI summary), ``report_title`` the single-run report's; ``unit`` is
    "accuracy" (a fraction printed in %), "score" (NMI, ARI) or "value"; ``read`` takes
    the block the metric lives in (a :class:`Layer` for pair and geometry metrics, a
    :class:`ProbeSet` for probes) and returns the number or None.
    """

    key: str
    title: str
    read: Callable[[Any], Any] = field(repr=False, compare=False)
    unit: str = "value"
    report_title: str = ""
    #: retrieval metrics only: the k of Recall@k
    k: int | None = None

    @property
    def accuracy(self) -> bool:
        return self.unit == "accuracy"


def _pair(kind: str, statistic: str) -> Callable[[Layer], Any]:
    def read(layer: Layer) -> Any:
        stats = layer.pairs.get(kind)
        return None if stats is None else getattr(stats, statistic)

    return read


#: per layer: the pair statistics compared across runs
PAIR_METRICS = (
    Metric("positive_mean", "positive mean", _pair("positive", "mean")),
    Metric(
        "cross_view_negative_mean", "cross-view neg. mean", _pair("cross_view_negative", "mean")
    ),
    Metric("cross_view_negative_var", "cross-view neg. var", _pair("cross_view_negative", "var")),
    Metric("cross_view_negative_std", "cross-view neg. std", _pair("cross_view_negative", "std")),
    Metric(
        "cross_view_negative_excessive_ratio",
        "cross-view excessive ratio",
        _pair("cross_view_negative", "excessive_ratio"),
    ),
    Metric(
        "within_view_negative_mean", "within-view neg. mean", _pair("within_view_negative", "mean")
    ),
    Metric(
        "within_view_negative_var", "within-view neg. var", _pair("within_view_negative", "var")
    ),
    Metric(
        "within_view_negative_std", "within-view neg. std", _pair("within_view_negative", "std")
    ),
    Metric(
        "within_view_negative_excessive_ratio",
        "within-view excessive ratio",
        _pair("within_view_negative", "excessive_ratio"),
    ),
)

#: per layer: the geometry compared across runs
GEOMETRY_METRICS = (
    Metric("alignment", "alignment", lambda layer: layer.geometry.alignment),
    Metric("uniformity_u", "uniformity u", lambda layer: layer.geometry.uniformity.u),
    Metric("uniformity_v", "uniformity v", lambda layer: layer.geometry.uniformity.v),
    Metric("effective_rank_u", "effective rank u", lambda layer: layer.geometry.effective_rank.u),
    Metric("effective_rank_v", "effective rank v", lambda layer: layer.geometry.effective_rank.v),
    Metric("frontier_gap", "frontier gap", lambda layer: layer.geometry.frontier_gap),
    Metric(
        "alignment_ceiling",
        "alignment ceiling",
        lambda layer: layer.geometry.alignment_ceiling.value,
    ),
)


def _collapse(read: Callable[[Collapse], Any]) -> Callable[[Layer], Any]:
    def value(layer: Layer) -> Any:
        return None if layer.collapse is None else read(layer.collapse)

    return value


#: per layer, with labels: the class-collapse diagnostics compared across runs
COLLAPSE_METRICS = (
    Metric(
        "within_class_variance", "within-class var", _collapse(lambda c: c.within_class_variance)
    ),
    Metric(
        "between_class_variance",
        "between-class var",
        _collapse(lambda c: c.between_class_variance),
    ),
    Metric("total_variance", "total var", _collapse(lambda c: c.total_variance)),
    Metric("s_w", "s_w (same class)", _collapse(lambda c: c.s_w)),
    Metric("s_b", "s_b (between classes)", _collapse(lambda c: c.s_b)),
    Metric("ssem_residual", "SSEM residual", _collapse(lambda c: c.ssem_residual)),
)


def _block(name: str, read: Callable[[Any], Any]) -> Callable[[ProbeSet], Any]:
    def value(probes: ProbeSet) -> Any:
        block = getattr(probes, name)
        return None if block is None else read(block)

    return value


#: the classification and clustering probes, in the comparison's order (retrieval is per
#: layer: :func:`retrieval_metric`)
PROBE_METRICS = (
    Metric(
        "linear_top1",
        "linear top-1",
        _block("linear", lambda b: b.top1),
        "accuracy",
        "linear probe top-1",
    ),
    Metric(
        "linear_top5",
        "linear top-5",
        _block("linear", lambda b: b.top5),
        "accuracy",
        "linear probe top-5",
    ),
    Metric(
        "knn_k20_top1",
        "kNN k=20 top-1",
        _block("knn", lambda b: b.top1.get(20)),
        "accuracy",
        "kNN top-1, k = 20",
    ),
    Metric(
        "knn_k200_top1",
        "kNN k=200 top-1",
        _block("knn", lambda b: b.top1.get(200)),
        "accuracy",
        "kNN top-1, k = 200",
    ),
    Metric(
        "clustering_nmi",
        "k-means NMI",
        _block("clustering", lambda b: b.nmi),
        "score",
        "k-means NMI",
    ),
    Metric(
        "clustering_ari",
        "k-means ARI",
        _block("clustering", lambda b: b.ari),
        "score",
        "k-means ARI",
    ),
)


def retrieval_metric(layer: str, k: int, *, row: bool = False) -> Metric:
    """Recall@k of the retrieval probe on ``layer``. ``row``: keyed as comparison.csv's
    ``retrieval_recall_at_<k>``, one column for every layer (the row names the layer)."""
    if row:
        key, title = f"retrieval_recall_at_{k}", f"retrieval R@{k}"
    else:
        key, title = f"retrieval_{layer}_recall_at_{k}", f"retrieval {layer} R@{k}"
    return Metric(
        key,
        title,
        lambda probes: probes.recall(layer, k),
        "accuracy",
        f"retrieval of the positive, {layer}, Recall@{k}",
        k,
    )


def probe_report_metrics(retrieval_layers: Iterable[str]) -> tuple[Metric, ...]:
    """The probe rows of a single run (report and CLI summary): linear, kNN, retrieval of
    each layer named, then k-means."""
    classification = tuple(m for m in PROBE_METRICS if m.unit == "accuracy")
    scores = tuple(m for m in PROBE_METRICS if m.unit != "accuracy")
    retrieval = tuple(
        retrieval_metric(layer, k) for layer in retrieval_layers for k in RETRIEVAL_KS
    )
    return classification + retrieval + scores
