"""The typed result model: what ``cl-diag analyze`` measured, declared once.

result.json is the contract between measuring and reporting (docs/result-schema.md; the JSON
Schema docs/result.schema.json is generated from these fields by tools/result_schema.py). Each
block is a frozen :class:`~cl_diag.io.records.Record` whose fields are its keys in file
order, so one codec reads and writes every block::

    >>> from cl_diag.result import load                                   # doctest: +SKIP
    >>> res = load("out/result.json")                                     # doctest: +SKIP
    >>> res.layers["embedding"].pairs["cross_view_negative"].excessive_ratio  # doctest: +SKIP
    0.5731

:meth:`Result.to_json` writes the same bytes for the same content (field order, shortest
float repr, NaN/Inf as null). Reading accepts every result of schema ``cl-diag/result/1``:
keys a newer writer adds are kept in a block's ``extra`` and written back; a change of
meaning bumps :data:`SCHEMA`; a missing or mistyped key is a UserError naming its path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cl_diag import upcalls
from cl_diag.errors import UserError
from cl_diag.io import records
from cl_diag.io.atomic import atomic_write_text
from cl_diag.io.output import dumps_json
from cl_diag.io.paths import path_argument
from cl_diag.io.records import At, Record, key, optional
from cl_diag.io.resultfile import MAX_RESULT_BYTES as MAX_RESULT_BYTES
from cl_diag.io.resultfile import is_result_file as is_result_file
from cl_diag.io.resultfile import read_result_json
from cl_diag.result.panel import (
    Ccem as Ccem,
)
from cl_diag.result.panel import (
    Condition as Condition,
)
from cl_diag.result.panel import (
    Eq10 as Eq10,
)
from cl_diag.result.panel import (
    FullBatch as FullBatch,
)
from cl_diag.result.panel import (
    FullBatchSigmoid as FullBatchSigmoid,
)
from cl_diag.result.panel import (
    LayerCheck as LayerCheck,
)
from cl_diag.result.panel import (
    Predicted as Predicted,
)
from cl_diag.result.panel import (
    SigmoidPanel as SigmoidPanel,
)
from cl_diag.result.panel import (
    Ssem as Ssem,
)
from cl_diag.result.panel import (
    SsemPredicted as SsemPredicted,
)
from cl_diag.result.panel import (
    Theory as Theory,
)
from cl_diag.result.panel import (
    TheoryLoss as TheoryLoss,
)
from cl_diag.result.panel import (
    VarianceBand as VarianceBand,
)

# re-exported for the readers that take them from here; their home is cl_diag.vocabulary
from cl_diag.vocabulary import LAYERS as LAYERS
from cl_diag.vocabulary import NEGATIVE_TYPES as NEGATIVE_TYPES
from cl_diag.vocabulary import PAIR_TYPES as PAIR_TYPES
from cl_diag.vocabulary import RESULT_NAME as RESULT_NAME

if TYPE_CHECKING:  # pandas is imported by to_frame only
    import pandas as pd

#: the schema this version reads and writes; bumped whenever a key changes meaning
SCHEMA = "cl-diag/result/1"
#: quantile levels in percent; a pair block's ``quantiles`` maps ``str(level)`` to the value
QUANTILES = (1, 5, 25, 50, 75, 95, 99)
#: the one layer of an embeddings file (and of a toy checkpoint's learned vectors)
EMBEDDING_LAYER = "embedding"
#: ``source.kind`` of embeddings measured as given (a file, or arrays from Python): no encoder,
#: no training config, origin unknown
EMBEDDING_SOURCES = ("embeddings", "arrays")
#: the raw-pixel baseline's one retrieval "layer": the baseline of every layer's retrieval
PIXELS = "pixels"
#: the probe baselines, in report order: what training added over pixels and over the init
BASELINES = ("raw_pixels", "random_init")
#: the k of Recall@k that the retrieval probe reports
RETRIEVAL_KS = (1, 5, 10)

_FUTURE_SCHEMA = re.compile(r"cl-diag/result/(\d+)")


def _context(where: str) -> At:
    """Where a key of a result sits, for the message of a missing or mistyped one."""
    return At(where, "a valid cl-diag result", "Re-run `cl-diag analyze` to write it again.")


#: the context of a block parsed on its own, not from a file
_IN_MEMORY = _context("a result block")


# --------------------------------------------------------------------------- pair statistics


@dataclass(frozen=True, kw_only=True)
class Histogram(Record):
    """Counts of similarities in ``bins`` equal bins on ``range`` (always [-1, 1])."""

    range: list[float] = key(factory=lambda: [-1.0, 1.0])
    bins: int
    counts: list[int]


#: a [low, high] interval (an end that is not finite, e.g. a log of 0, is written null)
Interval = tuple[float | None, float | None]


@dataclass(frozen=True, kw_only=True)
class Sampling(Record):
    """How the estimates of a block of ``--pairs moments`` were made: from ``pairs`` pairs
    drawn uniformly (with replacement, seeded), with intervals at ``confidence`` for the
    population's values: ``excessive_ratio`` [low, high] (Wilson score interval) and, per
    quantile level, [low, high] (distribution-free: the order statistics whose ranks bound the
    binomial count of draws below the quantile). None where the sample holds no pair."""

    pairs: int
    confidence: float
    excessive_ratio: Interval | None = None
    quantiles: dict[str, Interval | None]


@dataclass(frozen=True, kw_only=True)
class PairStats(Record):
    """Statistics of one pair type's cosine similarities s (docs/result-schema.md).

    ``mean``, ``var`` (population, ddof 0), ``std``, ``min``, ``max`` of s; ``quantiles``
    maps the percent level (``"1"`` ... ``"99"``) to the value, within ``quantile_error``
    of the exact quantile; ``estimate`` marks a sampled result. Negative types add the
    excessive-separation ratio of Lee et al. (ICML 2025), #{s < delta} / count with
    delta = -1/(n_ref - 1), and with labels the same statistics by class (``by_class``).
    Statistics of an empty split (``count`` 0) are None.
    """

    count: int = key("pairs measured: n positives, n(n-1) of each negative type")
    estimate: bool = key("true in sampled mode")
    mean: float | None
    var: float | None = key("population variance (ddof 0)")
    std: float | None
    min: float | None
    max: float | None
    quantiles: dict[str, float | None] = key("percent level ('1' ... '99') -> quantile")
    quantile_error: float | None = key("bound on |reported - exact quantile|; 0 when exact")
    histogram: Histogram
    excessive_ratio: float | None = key(
        "negative types: fraction of similarities strictly below delta",
        default=None,
        omit="excessive_count",
    )
    #: None only for positives, which have no threshold: the key is then absent
    excessive_count: int | None = optional("negative types: similarities strictly below delta")
    #: absent in results written before it was measured (the claims then fall back on min/max)
    excessive_margin_count: int | None = optional(
        "negative types: similarities below delta - 0.001 (EXCESS_MARGIN), to the fine "
        "histogram's grid edge at or below it"
    )
    #: ``--pairs moments``: the statistics that are exact although ``estimate`` is true (count,
    #: mean, var, std, over every pair); the others come from the sample ``sampling`` describes
    #: (its ``pairs`` similarities are what ``histogram`` and ``excessive_count`` count)
    exact: tuple[str, ...] | None = optional("moments mode: the statistics over every pair")
    sampling: Sampling | None = optional("moments mode: the sample of the other statistics")
    by_class: ClassSplit | None = optional("negative types, with labels: the split by class")
    by_view: ViewSplit | None = optional("within-view negatives of embeddings: each view's own")

    @property
    def negative(self) -> bool:
        """True for a negative pair type (it carries the excessive ratio)."""
        return self.excessive_count is not None

    @property
    def excessive_margin_ratio(self) -> float | None:
        """#{s < δ − ε} / count (ε = 0.001, ``excessive_margin_count``): the share of negatives
        separated beyond δ by more than float residue; None for positives, for an empty split
        and in results written before the count was measured."""
        if self.excessive_margin_count is None or not self.count:
            return None
        return self.excessive_margin_count / self.count

    def quantile(self, level: int) -> float | None:
        """The ``level`` percent quantile (``level`` in :data:`QUANTILES`)."""
        return self.quantiles.get(str(level))

    @classmethod
    def from_dict(cls, d: object, at: At = _IN_MEMORY) -> PairStats:
        if isinstance(d, dict) and "excessive_ratio" in d and "excessive_count" not in d:
            (at / "excessive_count").fail("is missing")  # a negative type's count
        return super().from_dict(d, at)


@dataclass(frozen=True, kw_only=True)
class ViewMoments(Record):
    """The within-view negatives of one view, (x_i, x_j) with i < j: their ``count``
    n(n-1)/2, mean, population variance (ddof 0) and std, exact over every pair in closed
    form (cl_diag.measurement.modality.within_view_by_view)."""

    count: int
    mean: float | None
    var: float | None = key("population variance (ddof 0)")
    std: float | None


@dataclass(frozen=True, kw_only=True)
class ViewSplit(Record):
    """The within-view negatives split by view: ``u`` the pairs (u_i, u_j) of view 1, ``v``
    the pairs (v_i, v_j) of view 2 (i < j). Exact in every mode. The pooled block's count is
    the sum of the two, its mean their count-weighted mean and its variance the weighted mean
    of theirs plus the between-view part (law of total variance); for two encoders the two
    can differ widely, which the pooled numbers hide."""

    u: ViewMoments
    v: ViewMoments


@dataclass(frozen=True, kw_only=True)
class ClassSplit(Record):
    """A negative pair type split by label: same-class negatives are instance
    discrimination's false negatives."""

    same_class: PairStats
    different_class: PairStats


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True, kw_only=True)
class ViewValues(Record):
    """One number per view: u (first view) and v (second view)."""

    u: float | None
    v: float | None


@dataclass(frozen=True, kw_only=True)
class EffectiveRank(ViewValues):
    """RankMe (Garrido et al., ICML 2023) per view: exp(-sum_k p_k log p_k),
    p_k = sigma_k / ||sigma||_1 + epsilon."""

    epsilon: float | None = None


@dataclass(frozen=True, kw_only=True)
class Spectrum(Record):
    """Eigenvalues of each view's population covariance, descending."""

    u: list[float] = key(factory=list)
    v: list[float] = key(factory=list)


@dataclass(frozen=True, kw_only=True)
class Ceiling(Record):
    """Thm 5.2 (Lee et al., ICML 2025): E[s_pos] <= 1 + E[s_neg] + 1/(n_ref - 1)."""

    value: float | None = None
    below_one: bool | None = None


@dataclass(frozen=True, kw_only=True)
class UniformitySampling(Record):
    """``--pairs moments``: the uniformity is estimated from ``pairs`` pairs i != j of each view
    drawn uniformly (seeded); ``u``, ``v``: [low, high] intervals at ``confidence``."""

    pairs: int
    confidence: float
    u: Interval | None = None
    v: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class Geometry(Record):
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
    uniformity_sampling: UniformitySampling | None = optional("moments mode: how it was estimated")


# --------------------------------------------------------------------------- class collapse


@dataclass(frozen=True, kw_only=True)
class ClassVariance(Record):
    """One class of a collapse block: its instances and within-class variance 1 - ||mu_c||^2."""

    count: int | None = None
    within_class_variance: float | None = None
    instance_within_class_variance: float | None = optional(
        "the within-class variance of the class's instance means (u_i + v_i)/2"
    )


@dataclass(frozen=True, kw_only=True)
class Collapse(Record):
    """Class-collapse diagnostics of a labelled layer (cl_diag.measurement.collapse has every
    formula): within-class variance 1 - ||mu_c||^2 (mean over classes, and ``per_class`` in
    sorted label order), between-class and total variance, s_w (same class, different
    instance) and s_b (different classes) mean similarities, the SSEM identity residual
    1 + (n-1) s_w + n(m-1) s_b (n = instances per class, m = ``classes``; exact for a
    ``balanced`` sample) and ``collapsed`` = within-class variance < ``epsilon``. Exact:
    computed from class sums over every instance, both views. The within-class variance of
    the views splits into ``view_spread`` (the spread of each instance's views about their
    mean, (1 - s_pos)/2 averaged in each class) and ``instance_within_class_variance`` (that
    of the instance means (u_i + v_i)/2 about the class mean: class collapse of instances,
    docs/ssem.md); results written before these two were measured hold none.
    ``batch_instance_within_class_variance``: the instance term at the scope of the SSEM, one
    balanced batch of ``batch_instances`` instances per class, in expectation over such batches
    drawn from this sample (cl_diag.measurement.collapse.at_batch_scope); for a supcl run
    trained on balanced batches, absent otherwise."""

    classes: int
    instances: int
    views: int = 2
    balanced: bool = key("every class has the same number of instances", default=False)
    within_class_variance: float | None
    between_class_variance: float | None = None
    total_variance: float | None = None
    s_w: float | None = None
    s_b: float | None = None
    ssem_residual: float | None = None
    view_spread: float | None = optional(
        "mean over classes of (1 - s_pos,c)/2, the views' spread about their instance mean"
    )
    instance_within_class_variance: float | None = optional(
        "mean over classes of the within-class variance of the instance means (u_i + v_i)/2: "
        "within_class_variance - view_spread"
    )
    batch_instances: int | None = optional(
        "instances per class of the balanced batch the SSEM speaks of (the training batch's n)"
    )
    batch_instance_within_class_variance: float | None = optional(
        "instance_within_class_variance at the batch's scope: its expectation over balanced "
        "batches of batch_instances per class drawn without replacement from this sample"
    )
    epsilon: float | None = None
    collapsed: bool | None = None
    per_class: list[ClassVariance] = key(factory=list)


@dataclass(frozen=True, kw_only=True)
class CrossViewMoments(Record):
    """Mean and population variance (ddof 0) of the positives (u_i, v_i) and of the
    cross-view negatives (u_i, v_j), i != j, exact over every pair in closed form."""

    positive_mean: float | None
    positive_var: float | None
    negative_mean: float | None
    negative_var: float | None


@dataclass(frozen=True, kw_only=True)
class ModalityGap(Record):
    """The modality gap of two views from different encoders (Liang et al., NeurIPS 2022,
    "Mind the Gap"), on the L2-normalised rows (cl_diag.measurement.modality.modality_gap):
    the view centroids mu_1 = mean_i u_i and mu_2 = mean_i v_i, ``centroid_distance``
    ||mu_1 - mu_2||, ``between_view_variance`` ||mu_1 - mu_2||^2 / 4 (the variance of the
    pooled 2n rows explained by which view a row is from), ``total_variance`` E||z - mu||^2
    = 1 - ||mu||^2 with mu = (mu_1 + mu_2) / 2 (the pooled rows' total variance) and
    ``variance_share`` their ratio in [0, 1]; ``before`` and ``after`` the cross-view
    statistics as measured and with the gap removed (each view centred on its own centroid,
    u'_i = (u_i - mu_1) / ||u_i - mu_1||, likewise v, rows re-normalised). ``after`` is None
    when a centred row is zero (a row equal to its view's centroid), which no direction
    represents."""

    centroid_distance: float
    centroid_norms: ViewValues = key("||mu_1||, ||mu_2||")
    between_view_variance: float
    total_variance: float
    variance_share: float | None = key("between / total; null when the total is 0")
    before: CrossViewMoments
    after: CrossViewMoments | None = key("gap removed; null when a centred row is 0")


@dataclass(frozen=True, kw_only=True)
class Projection(Record):
    """A 2-D view of a layer (cl_diag.measurement.projection): the L2-normalised rows of view u
    of a seeded sample of at most ``MAX_POINTS`` instances (row indices ``rows``, ascending),
    projected to two coordinates ``x``, ``y`` by ``method`` ("pca": onto the sample's first two
    principal axes, ``explained`` their shares of its variance; "umap": UMAP with
    ``random_state`` = ``seed``); ``classes`` the class code of each point (codes 0..C-1 in
    sorted label order), with labels only. Coordinates rounded to 6 decimals."""

    method: str
    seed: int
    rows: list[int] = key("instance index of each point, ascending")
    x: list[float]
    y: list[float]
    classes: list[int] | None = optional("with labels only")
    explained: list[float] | None = optional("pca: share of the sample's variance per axis")
    settings: dict[str, Any] | None = optional()


@dataclass(frozen=True, kw_only=True)
class Layer(Record):
    """One measured layer: n instances of dimension d, its pair statistics by pair type
    (:data:`PAIR_TYPES`), its geometry, with labels its class-collapse diagnostics, for views
    from two encoders the modality gap, and its 2-D views by method."""

    n: int = key("instances (rows of each view)")
    d: int = key("dimension")
    pairs: dict[str, PairStats] = key(f"pair type ({', '.join(PAIR_TYPES)}) -> its statistics")
    geometry: Geometry
    collapse: Collapse | None = optional("with labels only")
    modality_gap: ModalityGap | None = optional("views from two encoders (--keys, --cross-modal)")
    projections: dict[str, Projection] | None = optional(
        "method (pca always; umap when umap-learn is installed) -> a 2-D view of the layer"
    )


# --------------------------------------------------------------------------- probes


@dataclass(frozen=True, kw_only=True)
class LinearProbe(Record):
    """Multinomial logistic regression on L2-normalised features; test top-1 / top-5
    accuracy (fractions) at the validation-chosen weight decay, and top-1's 95 % Wilson score
    interval over the images it was scored on (older results lack it)."""

    top1: float | None = None
    top5: float | None = None
    top1_interval: Interval | None = optional("95 % Wilson interval of top1 [low, high]")
    weight_decay: float | None = optional()
    settings: dict[str, Any] | None = optional()


@dataclass(frozen=True, kw_only=True)
class KnnScore(Record):
    """The kNN probe's test top-1 accuracy at one k, with its 95 % Wilson score interval over
    the test images (older results lack it)."""

    top1: float | None = None
    top1_interval: Interval | None = optional("95 % Wilson interval of top1 [low, high]")


@dataclass(frozen=True, kw_only=True)
class KnnProbe(Record):
    """Weighted cosine kNN (InstDisc / solo-learn: votes sum exp(s / T)); test top-1 by k."""

    scores: dict[int, KnnScore] = key("k -> scores, as the keys k20, k200", pattern="k{}")
    settings: dict[str, Any] | None = optional()

    @property
    def top1(self) -> dict[int, float | None]:
        """Test top-1 accuracy by k."""
        return {k: score.top1 for k, score in self.scores.items()}


@dataclass(frozen=True, kw_only=True)
class RetrievalScores(Record):
    """Recall@k by k and the median rank of one retrieval direction."""

    recall: dict[int, float | None] = key("Recall@k by k", pattern="recall_at_{}")
    median_rank: float | None = optional()


@dataclass(frozen=True, kw_only=True)
class Retrieval(Record):
    """Retrieval of the positive: rank_i = 1 + #{j != i : s_ij >= s_ii} of v_i among all v
    for u_i; Recall@k = (1/n) #{i : rank_i <= k} and the median rank. ``reverse``: the same
    with the roles swapped (v_i queried among all u: view 2 -> view 1), measured for
    embeddings (e.g. text -> image after image -> text)."""

    recall: dict[int, float | None] = key("Recall@k by k", pattern="recall_at_{}")
    median_rank: float | None = optional()
    reverse: RetrievalScores | None = optional("view 2 -> view 1: v_i queried among all u")
    settings: dict[str, Any] | None = optional()


@dataclass(frozen=True, kw_only=True)
class Clustering(Record):
    """k-means with k = the number of classes; NMI in [0, 1] and ARI in [-1, 1] against labels."""

    nmi: float | None = None
    ari: float | None = None
    settings: dict[str, Any] | None = optional()


@dataclass(frozen=True, kw_only=True)
class ProbeSet(Record):
    """The probes of one representation (trained, or a baseline): each None when not run.
    ``retrieval`` maps the layer (or :data:`PIXELS`) to its retrieval scores."""

    linear: LinearProbe | None = optional()
    knn: KnnProbe | None = optional()
    clustering: Clustering | None = optional()
    retrieval: dict[str, Retrieval] | None = optional("layer -> retrieval of the positive")

    def recall(self, layer: str, k: int) -> float | None:
        """Recall@k of the retrieval probe on ``layer``; None when not measured."""
        block = (self.retrieval or {}).get(layer)
        return None if block is None else block.recall.get(k)


@dataclass(frozen=True, kw_only=True)
class SplitSize(Record):
    """How many images of an evaluation split the probes used, of how many."""

    images: int | None = None
    of: int | None = None


@dataclass(frozen=True, kw_only=True)
class Validation(Record):
    """A validation split carved from the probes' train split (``analyze
    --validation-fraction``): ``fraction`` of each class, drawn with ``seed``
    (:func:`cl_diag.measurement.probes.stratified_split`, per class), ``n_val`` images held out
    and ``n_fit`` left; the linear probe fitted on those and scored on the held-out ones. The
    accuracy a training option (a VRN weight) is chosen on without the test split."""

    fraction: float | None = None
    seed: int | None = None
    n_fit: int | None = None
    n_val: int | None = None
    linear: LinearProbe | None = optional()


@dataclass(frozen=True, kw_only=True)
class Probes(ProbeSet):
    """The probes of the trained representation on ``layer`` features (retrieval on the
    layers it names), the evaluation splits used, the validation split's probe when one was
    carved, and the baselines by name (:data:`BASELINES`)."""

    layer: str = "backbone"
    splits: dict[str, SplitSize] | None = optional("split (train, test) -> images used")
    validation: Validation | None = optional(
        "the linear probe on a validation split carved from the train split"
    )
    baselines: dict[str, ProbeSet] | None = optional("raw_pixels, random_init -> probes")
    skipped: dict[str, str] | None = optional("probes asked for that could not run -> why")

    _JSON_ORDER = (
        "layer",
        "splits",
        *ProbeSet.json_keys(),
        "validation",
        "baselines",
        "skipped",
    )

    def baseline(self, name: str) -> ProbeSet | None:
        return (self.baselines or {}).get(name)


# --------------------------------------------------------------------------- environment, commands
# Issue 22 (reproduction): the environment fingerprint a result (and a checkpoint) was made under,
# and the resolved commands that made it, so that `cl-diag reproduce` re-runs them exactly.


@dataclass(frozen=True, kw_only=True)
class Environment(Record):
    """The environment fingerprint (:func:`cl_diag.environment.fingerprint`): CPU model and the
    ATen CPU capability used, threads and workers, the device (and GPU, driver, cuDNN), library
    versions and builds, determinism and TF32 flags, and the relevant environment variables.
    Equal fingerprints promise equal bytes (docs/reproducibility.md)."""

    cpu: dict[str, Any] = key("model, machine, the ATen CPU capability used", factory=dict)
    threads: dict[str, Any] = key("intra_op, inter_op, workers, processes (ranks)", factory=dict)
    device: str | None = key("the device type the run computed on", default=None)
    cuda: dict[str, Any] | None = key("the GPU, driver and cuDNN; null on CPU", default=None)
    libraries: dict[str, Any] = key("python, cl_diag, torch, numpy, ... versions", factory=dict)
    builds: dict[str, Any] = key("how torch and numpy were built", factory=dict)
    flags: dict[str, Any] = key("determinism and TF32 flags", factory=dict)
    variables: dict[str, Any] = key("the environment variables that change numbers", factory=dict)

    def differences(self, other: Environment | None) -> list[str]:
        """The dotted fields on which ``other`` differs (``threads.intra_op``, ...)."""
        from cl_diag.environment import differences

        return differences(self.to_dict(), None if other is None else other.to_dict())


@dataclass(frozen=True, kw_only=True)
class Commands(Record):
    """The resolved commands that made a result: ``analyze`` (every option of the analysis, as
    run) and ``train`` (the training options a cl-diag checkpoint records, None for any other
    input). ``cl-diag reproduce`` re-runs them; nothing is guessed."""

    analyze: dict[str, Any] | None = key("every option of the analysis, as run", default=None)
    train: dict[str, Any] | None = key(
        "the training options a cl-diag checkpoint records; null for any other input", default=None
    )


# --------------------------------------------------------------------------- source and result


@dataclass(frozen=True, kw_only=True)
class Tool(Record):
    """The program that wrote the result."""

    name: str = "cl-diag"
    version: str = ""


@dataclass(frozen=True, kw_only=True)
class ImageSize(Record):
    """The side in pixels of the images a checkpoint or module was analysed at, and why:
    ``--image-size`` (``image_size=``), the training size the checkpoint's config records,
    an architecture's fixed input, or the dataset's own size."""

    value: int
    source: str = key("where the side came from, in words", name="from")
    trained: int | None = optional("the training side the checkpoint's config records")
    channels: int | None = optional(
        "channels fed to the model when the data has fewer (digits' grey repeated to 3)"
    )


@dataclass(frozen=True, kw_only=True)
class TrainingLoss(Record):
    """The training loss over its last two windows of at least a tenth of the steps each, from
    a cl-diag checkpoint's metrics rows (cl_diag.measurement.convergence.loss_trend): whether
    the run reached a plateau, and the final loss a claim about an optimum compares with the
    optimum loss. ``contrastive`` is the loss term without VRN's (equal without VRN)."""

    steps: int = key("the run's optimiser steps")
    final: float = key("mean loss over the last window of steps")
    final_steps: int = key("the steps in the last window")
    before: float = key("mean loss over the window before it")
    before_steps: int = key("the steps in that window")
    change: float = key("relative change per tenth of the steps (positive: still falling)")
    change_se: float = key("its standard error, from the spread of the rows in each window")
    contrastive: float | None = optional("the final mean of the contrastive term alone")


@dataclass(frozen=True, kw_only=True)
class TrainingCurves(Record):
    """A cl-diag checkpoint's metrics rows as columns, drawn as the analysis report's training
    curves (cl_diag.measurement.convergence.curve_columns): ``step`` and each logged column but
    the timings, one value per kept row (null where a row lacks it); at most 200 rows of the
    ``rows`` it held, evenly spaced, the last and every online-kNN row among them."""

    rows: int = key("the metrics rows the checkpoint held")
    columns: dict[str, Any] = key("'step' and each column -> one value per kept row")

    def as_rows(self) -> list[dict[str, Any]]:
        """The kept rows as dicts (a column's null left out), as metrics.csv's rows read."""
        names = list(self.columns)
        steps = self.columns.get("step") or []
        return [
            {k: self.columns[k][i] for k in names if self.columns[k][i] is not None}
            for i in range(len(steps))
        ]


@dataclass(frozen=True, kw_only=True)
class Source(Record):
    """What was analysed: ``kind`` "embeddings" (a file, with its ``sha256``), "arrays"
    (given to :func:`cl_diag.measure`: no path, the arrays' ``sha256``), "module" (given to
    :func:`cl_diag.analyze`) or "checkpoint" (``weights_sha256`` of its tensors, its format,
    arch, dataset, where in training it was taken, and how its two ``views`` were made).
    Other keys a checkpoint reader records (projector layout, notes, ...) are in ``extra``."""

    kind: str = ""
    path: str | None = optional()
    sha256: str | None = optional("of the embeddings file, or of the arrays as measured")
    weights_sha256: str | None = optional("of the model's tensors (names, dtypes, shapes, bytes)")
    format: str | None = optional("cl-diag, solo-learn, lightly, moco, dino, state-dict, mapped")
    arch: str | None = optional()
    dataset: str | None = optional()
    n_train: int | None = optional()
    # epoch and global_step are as the checkpoint recorded them (Lightning's may be a float or
    # a string): a user's file is data, copied, never a reason to fail after the measuring
    epoch: Any = optional("the training epoch the checkpoint was taken at")
    step: int | None = optional()
    global_step: Any = optional("Lightning's global step")
    complete: bool | None = optional("the training run reached its last step")
    cifar_stem_padding: Any = optional('{"value": int, "from": why}, or a bare int')
    views: dict[str, Any] | None = optional("how the analysed views were made")
    versions: Any = optional("the package versions the checkpoint recorded")
    provenance: dict[str, Any] | None = optional("where arch and dataset were read from")
    image_size: ImageSize | None = optional("the side of the images encoded, and why")
    environment: Environment | None = optional(
        "the fingerprint of the environment that trained the checkpoint (its last.pt's record)"
    )
    loss: TrainingLoss | None = optional(
        "the training loss's last windows (cl-diag checkpoints): plateau and final loss"
    )
    curves: TrainingCurves | None = optional(
        "the training's metrics rows as columns (cl-diag checkpoints): the report's curves"
    )
    #: the keys as they were given, in order: the readers record null values and key order
    #: (which differs between checkpoint formats) and both are written back as given
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False, metadata={"json": False})

    @classmethod
    def from_dict(cls, d: object, at: At = _IN_MEMORY) -> Source:
        return dataclasses.replace(super().from_dict(d, at), keys=tuple(at.obj(d)))

    def to_dict(self) -> dict[str, Any]:
        if not self.keys:
            return super().to_dict()
        # a recorded key missing from the written ones held None (omitted when written afresh)
        written = super().to_dict()
        return {k: written.get(k) for k in self.keys}


@dataclass(frozen=True, kw_only=True)
class Result(Record):
    """One ``cl-diag analyze`` result (docs/result-schema.md).

    ``delta`` (the key ``threshold`` in the file) is δ = -1/(n_ref - 1), the simplex-ETF
    similarity of n_ref training instances (Thm 5.1) that the excessive ratios count against;
    ``mode`` "exact" (all pairs), "sampled" (``num_pairs`` per type, estimates) or "moments"
    (exact means and variances over all pairs, the rest estimated from ``num_pairs`` per type);
    ``config`` the training config of a checkpoint ({} for embeddings). ``probes`` and
    ``theory`` are None for an embeddings file.
    """

    schema: str = key(schema={"const": SCHEMA})
    tool: Tool = key(factory=Tool)
    source: Source = key(factory=Source)
    n_ref: int = key("training instances delta refers to", schema={"minimum": 2})
    delta: float = key("delta = -1/(n_ref - 1), the simplex-ETF similarity", name="threshold")
    mode: str = key("exact (every pair), sampled or moments", default="exact")
    num_pairs: int | None = key("pairs per type, sampled mode only", default=None)
    seed: int | None = None
    conventions: dict[str, Any] = key("the conventions behind the numbers", factory=dict)
    config: dict[str, Any] = key("the checkpoint's training config; {} otherwise", factory=dict)
    layers: dict[str, Layer] = key("layer name -> measurements", schema={"minProperties": 1})
    probes: Probes | None = optional("checkpoints only")
    theory: Theory | None = optional("checkpoints only")
    commands: Commands | None = optional(
        "what made this result: the analyze options and, for a cl-diag checkpoint, its training's"
    )
    environment: Environment | None = optional(
        "the environment the analysis ran in (the training's: source.environment)"
    )

    @classmethod
    def from_dict(cls, d: object, at: At | None = None, *, where: str = "the result") -> Result:
        """Check and type a result dict (as read from result.json, or built in memory);
        a problem is a :class:`UserError` naming ``where`` and the fix."""
        where = at.where if at is not None else where
        if not isinstance(d, dict):
            raise UserError(
                f"{where} holds JSON but not a result object. "
                "Pass the result.json `cl-diag analyze` wrote."
            )
        _check_schema(d.get("schema"), where)
        layers = d.get("layers")
        if not isinstance(layers, dict) or not layers:
            raise UserError(
                f"{where} has no measured layers ('layers' is missing or empty). "
                "Re-run `cl-diag analyze`."
            )
        n_ref, delta = d.get("n_ref"), d.get("threshold")
        valid_n = isinstance(n_ref, int) and not isinstance(n_ref, bool) and n_ref >= 2
        if not valid_n or isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise UserError(
                f"{where} lacks a valid 'n_ref' (an integer >= 2) and 'threshold'. "
                "Re-run `cl-diag analyze`."
            )
        return super().from_dict(d, _context(where))

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read and check a result.json (:func:`load`)."""
        return load(path)

    def to_json(self) -> str:
        """result.json's text: schema key order, shortest float repr, NaN/Inf as null."""
        return dumps_json(self.to_dict())

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the analysis into the folder ``path`` (created if missing): result.json,
        report.md, report.html, result.csv and the figures, the bytes ``cl-diag analyze``
        writes for this result, staged and moved into place only when all are written. Files
        there that cl-diag did not write are refused unless ``overwrite`` (as ``--overwrite``). A
        ``path`` ending in ``.json`` gets result.json alone, written atomically (its folder
        created if missing). Returns ``path``."""
        path = path_argument(path, "path")
        if path.suffix.lower() == ".json" and not path.is_dir():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"cannot make the folder {path.parent} for {path.name} "
                    f"({exc.strerror or exc}); give a path whose folder exists or can be made."
                ) from None
            atomic_write_text(path, self.to_json())
            return path
        if upcalls.analysis_writer is None:  # only while cl_diag/__init__.py itself is running
            raise RuntimeError("cl_diag has not finished importing: no analysis writer yet")
        upcalls.analysis_writer(self, path, overwrite=overwrite)
        return path

    # ---- its short form (the whole result is in to_json, to_frame and the fields)

    def __repr__(self) -> str:
        """A few lines: what was measured, each layer's n and d, the headline numbers."""
        if upcalls.display_text is None:  # only while cl_diag/__init__.py itself is running
            return f"<cl-diag Result: {self.source.kind or 'result'}, layers {list(self.layers)}>"
        return upcalls.display_text(self)

    def _repr_html_(self) -> str:
        """The headline table as an HTML fragment (IPython/Jupyter display protocol)."""
        if upcalls.display_html is None:
            from html import escape

            return f"<pre>{escape(repr(self))}</pre>"
        return upcalls.display_html(self)

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
                        rows.append((layer_name, str(kind), split, statistic, _float(value)))
        return pd.DataFrame(rows, columns=["layer", "pair_type", "split", "statistic", "value"])


def _statistics(stats: PairStats) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [
        (name, getattr(stats, name)) for name in ("count", "mean", "var", "std", "min", "max")
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


def load(path: str | Path) -> Result:
    """Read and check one result.json (or the folder holding it); every problem is a
    :class:`UserError` naming the file and the fix."""
    data, path = read_result_json(path_argument(path, "path"))
    return Result.from_dict(data, where=str(path))


# --------------------------------------------------------------------------- JSON Schema


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of result.json, derived from the blocks' fields
    (:func:`cl_diag.io.records.json_schema`); docs/result.schema.json is its text."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"cl-diag result.json, schema {SCHEMA}",
        "description": "Generated from cl_diag/result/ by tools/result_schema.py; "
        "docs/result-schema.md explains every block. Keys besides those listed are allowed: "
        "a newer writer's, which older readers keep.",
        **records.json_schema(Result),
    }


def json_schema_text() -> str:
    """docs/result.schema.json's text: :func:`json_schema`, indented, UTF-8."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
