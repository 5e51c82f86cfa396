"""``analyze``: an embeddings file or a trained encoder in, result.json and reports out
(:mod:`cl_diag.cli.analyze` is its command line). The :class:`cl_diag.result.Result`
assembled here is the project's one pivot: the reports are rendered from it alone.

What the input is decides the work (:func:`cl_diag.models.checkpoints.read_checkpoint_file`):

* an **embeddings file**: its two views are measured as the layer ``embedding``;
* a **cl-diag or foreign checkpoint**: the paper's protocol where it states one (Lee et al.,
  ICML 2025, Sec. 6.1; paper-notes 8) and ours where it does not: ``num_images`` seeded
  training images, the training augmentation twice, encoded in eval mode, the ``projector``
  and ``backbone`` layers measured; the probes on backbone features of the un-augmented
  splits beside raw-pixel and random-init baselines; the theory panel from the training
  config. A ``toy`` checkpoint's learned vectors are its two views.

Under ``torchrun`` the ranks split the encoding and the exact pair tiles and merge them in
the single-process order (:mod:`cl_diag.runtime`), so result.json is the same bytes for any
number of ranks; the probes are fitted, and the files written, on rank 0.
:func:`analyze_module` (``cl_diag.analyze``) runs the same protocol on any ``nn.Module``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.io.embeddings import Embeddings, load_embeddings
from cl_diag.io.output import OWNED_FILES, staged_output
from cl_diag.io.paths import path_argument
from cl_diag.measurement.inputs import UnitViews, ViewsError, label_codes, normalise_views
from cl_diag.measurement.theory import delta, theory_panel
from cl_diag.models import CheckpointFile, KeyMapping, Subject, read_checkpoint_file
from cl_diag.models.subject import check_modules
from cl_diag.options import (
    CLI,
    MAX_BLOCK_SIZE,
    PYTHON,
    Spelling,
    check_products,
)
from cl_diag.orchestration.analysis_config import (
    ANALYZE,
    EMBEDDINGS_FIELDS,
    FILE_FIELDS,
    MODULE_INPUT,
    PROBES,
    AnalyzeConfig,
    PairOptions,
    check_analysis,
    option_names,
)
from cl_diag.orchestration.probe_plan import (
    CLASSIFICATION_PROBES,
    embeddings_probes,
    probe_block,
    retrieval_scores,
    unrunnable_probes,
)
from cl_diag.orchestration.subject import open_module_subject, open_subject
from cl_diag.result import (
    EMBEDDING_LAYER,
    LAYERS,
    RESULT_NAME,
    SCHEMA,
    Commands,
    Environment,
    Layer,
    Probes,
    Result,
    Source,
    Theory,
    Tool,
)
from cl_diag.runconfig import parse_run_config
from cl_diag.runtime import SINGLE, Ranks, RanksMismatch, Runtime, resolve_device, resolve_workers
from cl_diag.version import __version__
from cl_diag.vocabulary import PairType

#: what every number of a result means, written into it and printed in its report
CONVENTIONS = {
    "similarity": "cosine similarity of L2-normalised rows (norms in float64, rows rounded once "
    "to float32)",
    "matmul": "float32 with TF32 disabled",
    "accumulation": "float64",
    # the pair types' definitions as result.json has always spelled them (ASCII, unlike
    # PairType.definition's report wording): the bytes of every result stay the same
    PairType.POSITIVE: "(u_i, v_i), n pairs",
    PairType.CROSS_VIEW_NEGATIVE: "(u_i, v_j), i != j, all n(n-1) ordered pairs",
    PairType.WITHIN_VIEW_NEGATIVE: "(u_i, u_j) and (v_i, v_j), i < j, n(n-1) pairs",
    "excessive_ratio": "fraction of negatives with similarity strictly below threshold "
    "= -1/(n_ref - 1)",
    "variance": "population variance (ddof 0)",
}

__all__ = [
    "MAX_BLOCK_SIZE",
    "PROBES",
    "AnalyzeConfig",
    "AnalyzeResult",
    "PairOptions",
    "analyze",
    "analyze_module",
    "build_result",
    "check_analysis",
    "measure_embeddings",
    "measure_layer",
    "write_analysis",
]


#: (description, total or None) -> advance(n). The CLI passes a rich progress bar.
ProgressFactory = Callable[[str, "int | None"], Callable[[int], None]]


@dataclass
class AnalyzeResult:
    out: Path
    result: Result = field(repr=False)
    files: list[Path] = field(default_factory=list)
    #: False on the ranks > 0 of a torchrun job: they wrote nothing, and their ``result``
    #: holds the pairs and geometry but no probes (rank 0 fits those)
    is_main: bool = True

    def _written(self) -> str:
        if not self.is_main:
            return "written by rank 0 (this rank wrote nothing)"
        return f"written to {self.out} ({len(self.files)} files): open {self.out / 'report.html'}"

    def __repr__(self) -> str:
        """The result's short form (what was measured, the headline numbers) and its folder."""
        return f"{self.result!r}\n{self._written()}"

    def _repr_html_(self) -> str:
        """The result's headline table and its folder (IPython/Jupyter display protocol)."""
        from html import escape

        return f"{self.result._repr_html_()}\n<p>{escape(self._written())}</p>"


# --------------------------------------------------------------------------- measuring


def measure_layer(
    z1: torch.Tensor,
    z2: torch.Tensor,
    labels: torch.Tensor | None,
    *,
    n_ref: int,
    options: PairOptions,
    where: str,
    device: torch.device | None = None,
    ranks: Ranks = SINGLE,
    more_views: Sequence[torch.Tensor] = (),
    by_view: bool = False,
    cross_modal: bool = False,
) -> Layer:
    """Pair statistics and geometry of one layer's two views, normalised once for both.

    ``where`` names the views' origin in a UserError for views that cannot be measured;
    ``device``: where to measure (None: where the views are); ``ranks``: a torchrun job's ranks,
    which each pass the same views. ``more_views``: views 3..V (``--views V``, exact pairs);
    ``by_view``: each view's within-view negatives too; ``cross_modal``: the views come from two
    encoders, so the layer gets its modality gap.
    """
    from cl_diag.measurement.geometry import geometry_of
    from cl_diag.measurement.pairs import pair_statistics_of

    try:
        views = normalise_views(z1, z2)
        if device is not None:  # normalised where they are: the same unit rows on any device
            views = UnitViews(views.u.to(device), views.v.to(device))
        codes = label_codes(labels, views.n, views.u.device)
        # each further view checked and normalised as the first two are
        more = [normalise_views(z, z1).u.to(views.u.device) for z in more_views]
    except ViewsError as exc:
        raise UserError(exc.user_message(where)) from None
    try:
        pairs = pair_statistics_of(
            views,
            n_ref=n_ref,
            codes=codes,
            mode=options.pairs,
            num_pairs=options.num_pairs,
            seed=options.seed,
            block_size=options.block_size,
            hist_bins=options.hist_bins,
            ranks=ranks,
            more_views=more,
        )
        # The exact cross-view mean is already known (exact and moments modes); a sampled one
        # is an estimate, so let geometry compute the exact mean itself (O(nd)); so too with
        # more views, whose cross-view mean runs over every view pair. Moments mode is for
        # data-set scale: the uniformity (n^2/2 pairs per view) is estimated from as many
        # sampled pairs as the pair statistics.
        exact = options.pairs in ("exact", "moments") and not more
        exact_mean = pairs[PairType.CROSS_VIEW_NEGATIVE].mean if exact else None
        geo = geometry_of(
            views,
            n_ref=n_ref,
            cross_view_mean=exact_mean,
            ranks=ranks,
            uniformity_pairs=options.num_pairs if options.pairs == "moments" else None,
            seed=options.seed,
        )
    except RanksMismatch:
        raise UserError(
            f"The {ranks.world} torchrun ranks read different views from {where}; every rank "
            "must see the same input (the same file on every node) and the same options."
        ) from None
    collapse = None
    if codes is not None:  # labels known: the class-collapse diagnostics (exact, O(n d))
        from cl_diag.measurement.collapse import class_collapse_of

        # O(n d) from class sums, so every rank computes it whole (same views, same bits)
        collapse = class_collapse_of(views, codes)
    gap = None
    if by_view or cross_modal:  # O(n d^2) closed forms, the same bits on every rank
        from cl_diag.measurement.modality import modality_gap, within_view_by_view

        threads = torch.get_num_threads()
        within = PairType.WITHIN_VIEW_NEGATIVE
        if by_view:
            split = within_view_by_view(views, workers=threads)
            pairs = {**pairs, within: replace(pairs[within], by_view=split)}
        if cross_modal:
            gap = modality_gap(views, workers=threads)
    from cl_diag.measurement.projection import projections_of

    # a 2-D view for the report, from a bounded seeded sample: the same on every rank
    projections = projections_of(views.u, codes, seed=options.seed)
    return Layer(
        n=views.n,
        d=views.d,
        pairs=pairs,
        geometry=geo,
        collapse=collapse,
        modality_gap=gap,
        projections=projections,
    )


def build_result(
    *,
    source: Source,
    n_ref: int,
    options: PairOptions,
    layers: dict[str, Layer],
    training_config: dict | None = None,
    probes: Probes | None = None,
    theory: Theory | None = None,
    commands: Commands | None = None,
    device: torch.device | str = "cpu",
    workers: int | None = None,
    ranks: Ranks = SINGLE,
) -> Result:
    """Assemble the typed result from the measured layers and the probe and theory blocks,
    with the ``commands`` that made it and the fingerprint of this process's environment
    (``device``, ``workers`` and ``ranks`` as the measuring used them)."""
    from cl_diag.environment import fingerprint

    environment = fingerprint(device=device, workers=workers, processes=ranks.world)
    return Result(
        schema=SCHEMA,
        tool=Tool(name="cl-diag", version=__version__),
        source=source,
        n_ref=n_ref,
        delta=delta(n_ref),
        mode=options.pairs,
        num_pairs=options.num_pairs if options.pairs != "exact" else None,
        seed=options.seed,
        conventions=dict(CONVENTIONS),
        config=training_config or {},
        layers=layers,
        probes=probes,
        theory=theory,
        commands=commands,
        environment=Environment.from_dict(environment),
    )


def write_analysis(result: Result, out: Path, *, overwrite: bool = False) -> list[Path]:
    """Write ``result`` as the analysis folder ``out`` (result.json, report.md, report.html,
    result.csv, the figures) and return the files written: what ``cl-diag analyze`` and
    :meth:`cl_diag.Result.save` write, staged and moved into place by
    :func:`cl_diag.io.output.staged_output`, which refuses to replace a file it cannot prove
    cl-diag wrote unless ``overwrite``.
    """
    from cl_diag.report import render_analysis

    out = Path(out)
    with staged_output(out, kind="analysis", overwrite=overwrite) as staging:
        result.save(staging / RESULT_NAME)
        render_analysis(result, staging)
        files = sorted(path.relative_to(staging) for path in staging.rglob("*") if path.is_file())
    return [out / f for f in sorted([*files, Path(OWNED_FILES)])]


def _write(config: AnalyzeConfig, result: Result) -> AnalyzeResult:
    files = write_analysis(result, config.out, overwrite=config.overwrite)
    return AnalyzeResult(out=Path(config.out), result=result, files=files)


def analyze(config: AnalyzeConfig, *, progress: ProgressFactory | None = None) -> AnalyzeResult:
    """Measure ``config.input`` (embeddings file or checkpoint) and write result.json,
    report.md and report.html into ``config.out``.

    Under ``torchrun`` every rank calls this; the work is split over the ranks (module
    docstring), rank 0 shows ``progress`` and writes, and the process group is closed at
    the end unless the caller had initialised it."""
    import torch.distributed as dist

    config = check_analysis(config)
    device = resolve_device(config.device)
    config = replace(config, workers=resolve_workers(config.workers, device.type))
    mapping = KeyMapping.parse(
        backbone_prefix=config.backbone_prefix,
        projector_prefix=config.projector_prefix,
        renames=config.renames,
    )
    file = read_checkpoint_file(
        config.input, arch=config.arch, mapping=mapping, views=config.view_keys
    )
    if file.kind == "embeddings":
        _refuse_checkpoint_options(config)
    else:
        _refuse_embeddings_options(config)
    joined = dist.is_available() and dist.is_initialized()
    run = Runtime.start(device.type)
    try:
        shown = (progress or _no_progress) if run.is_main else _no_progress
        if file.kind == "embeddings":
            result = _analyze_embeddings(config, file.payload, run, shown)
        else:
            result = _analyze_checkpoint(config, file, mapping, shown, run)
    except BaseException:
        if not joined:
            run.close(wait=False)  # the other ranks may never reach a barrier
        raise
    else:
        if not joined:
            run.close(wait=True)
    if not run.is_main:
        return AnalyzeResult(out=Path(config.out), result=result, is_main=False)
    return _write(config, result)


def _refuse_checkpoint_options(config: AnalyzeConfig) -> None:
    """The options that describe a checkpoint (its architecture, data and key mapping) have
    nothing to act on in an embeddings file: refused, not silently ignored."""
    given = [
        name
        for name in FILE_FIELDS[2:]
        if getattr(config, name) not in (None, ())  # their defaults: None, or no renames
    ]
    if given:
        shown = ", ".join(CLI.name("rename" if n == "renames" else n) for n in given)
        raise UserError(
            f"{shown} describe{'s' if len(given) == 1 else ''} a checkpoint (its architecture, "
            f"data or keys); {config.input} is an embeddings file, measured as it is: drop "
            f"{'it' if len(given) == 1 else 'them'}."
        )


def _refuse_embeddings_options(config: AnalyzeConfig) -> None:
    """``--keys``, ``--labels`` and ``--cross-modal`` describe an embeddings file's arrays: a
    checkpoint's views are made by one encoder from its images, and its labels are its data
    set's, so they are refused, not ignored."""
    given = [name for name in EMBEDDINGS_FIELDS if getattr(config, name) is not None]
    if given:
        shown = " and ".join(CLI.name(n) for n in given)
        raise UserError(
            f"{shown} describe{'s' if len(given) == 1 else ''} the arrays of an embeddings "
            f"file; {config.input} is a checkpoint, whose two views one encoder makes from its "
            "images and whose labels are its data set's: drop "
            f"{'it' if len(given) == 1 else 'them'}."
        )


@contextmanager
def _restored(*modules: torch.nn.Module | None) -> Iterator[None]:
    """Give the caller's modules back as they were: encoding sets eval mode and moves them
    to the analysis device."""
    present = [m for m in modules if m is not None]
    modes = [(sub, sub.training) for m in present for sub in m.modules()]
    devices = [next(iter([*m.parameters(), *m.buffers()]), None) for m in present]
    places = [None if t is None else t.device for t in devices]
    try:
        yield
    finally:
        for module, place in zip(present, places, strict=True):
            if place is not None:
                module.to(place)
        for sub, training in modes:
            sub.train(training)


def analyze_module(
    encoder: torch.nn.Module,
    projector: torch.nn.Module | None = None,
    *,
    dataset: str,
    out: str | os.PathLike[str],
    data_root: str | os.PathLike[str] | None = None,
    val_root: str | os.PathLike[str] | None = None,
    image_size: int | None = None,
    training_config: Any = None,
    progress: ProgressFactory | None = None,
    output_key: str | None = None,
    **options: Any,
) -> AnalyzeResult:
    """The full analysis of any ``nn.Module``: ``cl_diag.analyze`` in Python.

    ``encoder`` maps an image batch to features (the ``backbone`` layer): a tensor, a tuple
    whose first element is one, or a dict holding one under ``output_key`` (default: the first
    of ``features``, ``feats``, ``embedding``, ``embeddings``, ``pooler_output``, or its only
    tensor); ``projector`` (optional) maps those on to the embedding (the ``projector`` layer).
    The protocol is ``cl-diag analyze``'s for a checkpoint, on ``dataset`` (digits, cifar10,
    cifar100 or imagefolder, from ``data_root``/``val_root``; ``image_size`` as
    :func:`~cl_diag.orchestration.subject.resolve_image_size` decides), with the random-init
    baseline when every parameter's module has ``reset_parameters()``, and the theory panel
    from ``training_config`` (train's vocabulary; a mapping or a dataclass). ``options`` are the
    other fields of :class:`AnalyzeConfig`. Writes the analysis into ``out`` and returns it; the
    modules are given back in the mode and on the device they came in. For example::

        import cl_diag, torchvision
        net = torchvision.models.resnet18(num_classes=10)
        net.fc = torch.nn.Identity()
        res = cl_diag.analyze(encoder=net, dataset="cifar10", data_root="~/data", out="a/",
                              training_config={"loss": "simclr", "batch_size": 256})
        res.result.layers["backbone"].pairs["cross_view_negative"].excessive_ratio
    """
    allowed = sorted(
        {f.name for f in fields(AnalyzeConfig)} - set(FILE_FIELDS) - set(EMBEDDINGS_FIELDS)
    )
    check_modules(encoder, projector)  # first: a path given as the encoder is named
    if "batch_size" in options:  # the encoding batch's name before it had its own
        raise UserError(
            "cl_diag.analyze takes the encoding batch as encode_batch_size (images per "
            "encoding batch); batch_size is the training batch of a run: pass it inside "
            "training_config."
        )
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(
            f"cl_diag.analyze got unknown option(s) {', '.join(unknown)}; besides encoder, "
            f"projector, dataset, out, data_root, val_root, image_size, output_key and "
            f"training_config it "
            f"takes {', '.join(allowed)}."
        )
    # the command line's words: "all", "none", "linear,knn", as well as ("linear", "knn")
    for name, names in (("layers", LAYERS), ("probes", PROBES)):
        if name in options:
            options[name] = option_names(
                options[name], names, name, none=name == "probes", spelling=PYTHON
            )
    if is_dataclass(training_config) and not isinstance(training_config, type):
        training_config = asdict(training_config)
    if training_config is not None and not isinstance(training_config, Mapping):
        raise UserError(
            "training_config must be a mapping such as {'loss': 'simclr', 'batch_size': 256} "
            f"(got {type(training_config).__name__})."
        )
    if training_config is not None:
        from cl_diag.models import check_training_config

        training_config = check_training_config(training_config, "training_config")
    image_size = ANALYZE["image_size"].normalise(image_size, PYTHON)
    config = AnalyzeConfig(
        input=MODULE_INPUT,
        out=path_argument(out, "out"),
        dataset=dataset,
        data_root=None if data_root is None else path_argument(data_root, "data_root"),
        val_root=None if val_root is None else path_argument(val_root, "val_root"),
        **options,
    )
    config = check_analysis(config, spelling=PYTHON)
    # one process: a module from Python is measured where the caller runs, never over ranks
    run = Runtime(resolve_device(config.device))
    config = replace(config, workers=resolve_workers(config.workers, run.device.type))
    subject = open_module_subject(
        encoder,
        projector,
        dataset=dataset,
        data_root=config.data_root,
        val_root=config.val_root,
        image_size=image_size,
        output_key=output_key,
        training_config=training_config,
        seed=config.seed,
        baselines=config.baselines and bool(config.probes),
    )
    name = f"the {type(encoder).__name__} passed to cl_diag.analyze"
    with _restored(encoder, projector):
        result = _measure_subject(
            config, subject, name, progress or _no_progress, run, spelling=PYTHON
        )
    return _write(config, result)


def _analyze_embeddings(
    config: AnalyzeConfig, payload: dict | None, run: Runtime, progress: ProgressFactory
) -> Result:
    if config.views > 2:
        raise UserError(
            f"--views {config.views} makes views of a checkpoint's training images; "
            f"{config.input} is an embeddings file of two views: drop --views."
        )
    keys = config.view_keys
    embeddings = load_embeddings(config.input, payload=payload, keys=keys, labels_key=config.labels)
    source = Source(
        kind="embeddings",
        path=str(config.input),
        sha256=embeddings.sha256,
        views=embeddings_views(keys, config.two_encoders),
    )
    # one step, said when it starts and ends (an exact pass at large n takes minutes)
    advance = progress(f"measuring the pairs and geometry of {embeddings.n:,} instances", None)
    result = measure_embeddings(
        embeddings,
        n_ref=config.n_ref,
        options=config.pair_options,
        source=source,
        device=run.device,
        ranks=run.ranks,
        probes=config.probes,
        cross_modal=config.two_encoders,
        commands=Commands(analyze=config.record()),
    )
    advance(1)
    return result


def embeddings_views(keys: tuple[str, str] | None, cross_modal: bool) -> dict[str, Any] | None:
    """What ``source.views`` records of an embeddings file's views: the arrays named and
    whether they come from two encoders; None for the default z1, z2 of one encoder (the
    source then reads as it always has)."""
    if keys is None and not cross_modal:
        return None
    views: dict[str, Any] = {}
    if keys is not None:
        views["view 1"], views["view 2"] = keys
    views["encoders"] = "two (cross-modal: the modality gap is measured)" if cross_modal else "one"
    return views


def measure_embeddings(
    embeddings: Embeddings,
    *,
    n_ref: int | None,
    options: PairOptions,
    source: Source,
    device: torch.device | None = None,
    ranks: Ranks = SINGLE,
    probes: Sequence[str] = (),
    cross_modal: bool = False,
    commands: Commands | None = None,
) -> Result:
    """The result of two views' embeddings (the layer ``embedding``): pair statistics (the
    within-view negatives also by view) and geometry against the threshold of ``n_ref``
    instances (default: the number of rows), the modality gap when ``cross_modal`` (views
    from two encoders), and the ``probes`` asked for that need no dataset (retrieval,
    :func:`embeddings_probes`). ``cl-diag analyze`` of an embeddings file and
    :func:`cl_diag.measure` both end here. ``device``: where to measure (None: where the
    views are); ``ranks``: a torchrun job's."""
    n_ref = n_ref if n_ref is not None else embeddings.n
    z1, z2, labels = embeddings.z1, embeddings.z2, embeddings.labels
    layer = measure_layer(
        z1,
        z2,
        labels,
        n_ref=n_ref,
        options=options,
        where=embeddings.path,
        device=device,
        ranks=ranks,
        by_view=True,
        cross_modal=cross_modal,
    )
    return build_result(
        source=source,
        n_ref=n_ref,
        options=options,
        layers={EMBEDDING_LAYER: layer},
        probes=embeddings_probes(
            embeddings, probes, options.pairs, seed=options.seed, is_main=ranks.is_main
        ),
        commands=commands,
        device=device if device is not None else z1.device,
        ranks=ranks,
    )


def _no_progress(description: str, total: int | None) -> Callable[[int], None]:
    return lambda n: None


# --------------------------------------------------------------------------- checkpoints


def _analyze_checkpoint(
    config: AnalyzeConfig,
    file: CheckpointFile,
    mapping: KeyMapping,
    progress: ProgressFactory,
    run: Runtime,
) -> Result:
    from cl_diag.trainconfig import RESUME_FREE_FIELDS

    # The model rebuilt and its data opened (orchestration.subject); from here on it is measuring.
    subject = open_subject(
        file,
        arch=config.arch,
        dataset=config.dataset,
        cifar_stem_padding=config.cifar_stem_padding,
        data_root=config.data_root,
        val_root=config.val_root,
        seed=config.seed,
        run_record_fields=RESUME_FREE_FIELDS,
        encoder=config.encoder,
        mapping=mapping,
        image_size=config.image_size,
    )
    return _measure_subject(config, subject, str(file.path), progress, run)


def _measure_subject(
    config: AnalyzeConfig,
    subject: Subject,
    name: str,
    progress: ProgressFactory,
    run: Runtime,
    *,
    spelling: Spelling = CLI,
) -> Result:
    """The protocol on a subject: views, layers, probes, baselines and theory. ``name`` says
    what was analysed (a path, or the module passed from Python), for the messages; ``run``
    where it is measured (this rank's device, the ranks of a torchrun job); ``spelling``
    how the messages name the options (the command line's or Python's)."""
    source = subject.source

    if subject.embeddings is not None:  # toy: the learned vectors are the two views
        if config.views > 2:
            raise UserError(
                f"--views {config.views}: {name} holds the toy dataset's two learned "
                "vectors per instance, not an encoder to make more views with; drop --views."
            )
        z1, z2 = subject.embeddings
        n_ref = config.n_ref if config.n_ref is not None else (subject.n_train or z1.shape[0])
        labels = subject.embedding_labels  # toy with --num-classes; else no classes
        measured = measure_layer(
            z1,
            z2,
            labels,
            n_ref=n_ref,
            options=config.pair_options,
            where=name,
            device=run.device,
            ranks=run.ranks,
        )
        layers: dict[str, Layer] = {EMBEDDING_LAYER: measured}
        probes = None
        if "retrieval" in config.probes and run.ranks.is_main:
            probes = Probes(
                layer=EMBEDDING_LAYER, retrieval={EMBEDDING_LAYER: retrieval_scores(z1, z2)}
            )
        return _checkpoint_result(config, subject, n_ref, layers, probes, run)

    layers_wanted = [layer for layer in LAYERS if layer in config.layers]
    if subject.projector is None and "projector" in layers_wanted:
        if list(config.layers) == ["projector"]:
            raise UserError(
                f"{name} holds no projector weights, so the layer 'projector' cannot be measured; "
                "use --layers backbone."
            )
        layers_wanted.remove("projector")
        source["layers_skipped"] = {"projector": "the file holds no projector weights"}
    known_n = config.n_ref if config.n_ref is not None else subject.n_train
    if known_n is None or known_n < 2:
        raise UserError(
            f"The training-set size of {name} is unknown; give --n-ref (e.g. 50000 for CIFAR)."
        )
    n_ref = known_n
    # open_subject and open_module_subject give every encoder its data (only toy runs,
    # handled above, carry embeddings instead); a module from Python may have no twin
    assert subject.backbone is not None
    assert subject.two_views is not None and subject.eval_split is not None
    eval_split = subject.eval_split

    from cl_diag.measurement.views import Pixels, Taps, encode_two_views, sample_indices

    _check_encoding_batch(config, subject, name, spelling)
    skipped: dict[str, str] = {}
    if any(p in config.probes for p in CLASSIFICATION_PROBES):
        # Open both evaluation splits now: a missing test split should stop the run before
        # minutes of encoding, not after; and a probe the labels cannot feed (one class, too
        # few samples to hold some out) is skipped now, with its reason, not failed later.
        subject.splits = {split: eval_split(split) for split in ("train", "test")}
        skipped = unrunnable_probes(config, subject)
    n_pool = len(subject.two_views)
    indices = sample_indices(n_pool, config.num_images, config.seed)
    taps: dict[str, torch.nn.Module] = {"trained": Taps(subject.backbone, subject.projector)}
    baselines = config.baselines and bool(config.probes)
    if baselines and "retrieval" in config.probes:
        if subject.random_backbone is not None:  # a module from Python may have no twin
            taps["random_init"] = Taps(subject.random_backbone, subject.random_projector)
        taps["raw_pixels"] = Pixels()
    drawn = subject.two_views
    if config.views > 2:  # V draws per image; the first two are the two-view draws
        from cl_diag.training.data import TwoViews

        if not isinstance(drawn, TwoViews):
            raise UserError(
                f"--views {config.views}: the views of {name} do not come from cl-diag's "
                "augmentation, so no more can be drawn; drop --views."
            )
        drawn = TwoViews(drawn.base, drawn.transform, drawn.seed, views=config.views)
    try:
        views, view_labels = encode_two_views(
            taps,
            drawn,
            indices,
            batch_size=config.encode_batch_size,
            device=run.device,
            workers=config.workers or 0,  # resolved by analyze(): never None here
            amp=config.amp,
            progress=progress(
                f"encoding {config.views} augmented views of {len(indices)} training images",
                len(indices),
            ),
            ranks=run.ranks,
        )
    except RuntimeError as exc:
        raise _too_small(exc, name, subject, spelling) or exc from None
    times = "twice" if config.views == 2 else f"{config.views} times"
    source["views"] = {
        "num_images": len(indices),
        "pool": int(n_pool),
        "sampling": "uniform without replacement under --seed, sorted by index",
        "augmentation": f"the training augmentation, {times}, seeded per image from (seed, index)",
        "mode": "eval (BatchNorm running statistics)",
        "amp": bool(config.amp and torch.cuda.is_available() and config.device != "cpu"),
    }
    if config.views > 2:
        source["views"]["views"] = config.views
        source["views"]["pairs"] = (
            "positives and cross-view negatives over every view pair, within-view negatives in "
            "every view; geometry and probes on views 1 and 2"
        )
    layers = {}
    for layer in layers_wanted:
        z1, z2, *more = views["trained"][layer]
        where = f"the {layer} outputs of {name}"
        advance = progress(f"measuring the pairs and geometry of the {layer} layer", None)
        layers[layer] = measure_layer(
            z1,
            z2,
            view_labels,
            n_ref=n_ref,
            options=config.pair_options,
            where=where,
            device=run.device,
            ranks=run.ranks,
            more_views=more,
        )
        advance(1)

    probes = None
    if config.probes:
        runnable = tuple(p for p in config.probes if p not in skipped)
        probes = probe_block(
            replace(config, probes=runnable), subject, views, layers_wanted, progress, run
        )
        if skipped and probes is not None:  # None on ranks > 0, which write no result
            probes = replace(probes, skipped=skipped)
    return _checkpoint_result(config, subject, n_ref, layers, probes, run)


def _training_command(subject: Subject) -> dict | None:
    """The training options a cl-diag checkpoint recorded, but for those of one invocation
    (``--resume``, ``--overwrite``, ``--quiet``): the command that trains the run again."""
    from cl_diag.trainconfig import SESSION_FIELDS

    recorded = subject.training_command
    if recorded is None:
        return None
    return {k: v for k, v in recorded.items() if k not in SESSION_FIELDS}


#: what torch says when an image is smaller than a network's downsampling takes
_TOO_SMALL = re.compile(
    r"Kernel size can't be greater than actual input size|Output size is too small|"
    r"input image size|smaller than kernel size|padded input size"
)


def _too_small(
    exc: RuntimeError, name: str, subject: Subject, spelling: Spelling
) -> UserError | None:
    """The UserError of an encoder that cannot take images this small (a ConvNeXt on 8-px
    digits), naming the side and the fix; None for any other failure."""
    if not _TOO_SMALL.search(str(exc)):
        return None
    side = (subject.source.get("image_size") or {}).get("value")
    option = spelling.name("image_size")
    example = f"{option} 32" if option.startswith("--") else f"{option}=32"
    return UserError(
        f"{name} cannot encode {side}-px images: they are smaller than its downsampling takes "
        f"({str(exc).splitlines()[0]}); give {example} (or the side it was trained at)."
    )


def _check_encoding_batch(
    config: AnalyzeConfig, subject: Subject, name: str, spelling: Spelling
) -> None:
    """The encoding batch of images (encode batch x 3 x side^2) within its declared bound
    (:data:`ANALYZE`), before any image is read; the side is the one the subject's data is
    cropped to (its checkpoint's, the module's ``image_size``, or the dataset's own)."""
    from cl_diag.training.augment import default_image_size

    spec = subject.data_spec
    if spec is None:
        return
    side = spec.image_size if spec.image_size is not None else default_image_size(spec.dataset)
    # the option's name when the user gave the side; else the checkpoint or dataset set it
    record = subject.source.get("image_size") or {}
    option = record.get("from") == spelling.name("image_size")
    check_products(
        {"encode_batch_size": config.encode_batch_size, "image_size": int(side)},
        ANALYZE,
        spelling=spelling,
        labels=None if option else {"image_size": f"the image side {side} of {name}"},
    )


def _checkpoint_result(
    config: AnalyzeConfig,
    subject: Subject,
    n_ref: int,
    layers: dict[str, Layer],
    probes: Probes | None,
    run: Runtime,
) -> Result:
    """A checkpoint's result: its measured layers and probes beside the theory panel of its
    training config, with the commands that made it (this analysis, and the training a
    cl-diag checkpoint records). A supcl run trained on balanced batches gets its collapse
    measure at the SSEM's scope too (one batch of the run's n instances per class)."""
    theory = theory_panel(
        parse_run_config(subject.training_config, n_train=subject.n_train), n_ref, layers
    )
    per_class = theory.ssem.n if theory.ssem is not None else None
    if per_class is not None and per_class >= 2:
        from cl_diag.measurement.collapse import at_batch_scope

        layers = {
            name: layer
            if layer.collapse is None
            else replace(layer, collapse=at_batch_scope(layer.collapse, per_class))
            for name, layer in layers.items()
        }
    return build_result(
        source=Source.from_dict(subject.source),
        n_ref=n_ref,
        options=config.pair_options,
        layers=layers,
        training_config=subject.training_config,
        probes=probes,
        theory=theory,
        commands=Commands(analyze=config.record(), train=_training_command(subject)),
        device=run.device,
        workers=config.workers,
        ranks=run.ranks,
    )
