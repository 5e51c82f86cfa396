"""The options of ``cl-diag analyze`` (and of ``cl_diag.measure`` / ``cl_diag.analyze``),
each declared once, and their checks that need no input: what the command line builds before
any heavy module is imported.

:class:`AnalyzeConfig` has one field per option of ``cl-diag analyze``; :data:`ANALYZE` is
their table, :data:`MEASURE` the "Pairs" options (``cl_diag.measure``'s keywords, read into a
:class:`PairOptions`). :func:`check_analysis` checks a config against them and against the
relations between options. :mod:`cl_diag.orchestration.analyze` measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path, PurePath
from typing import Any

from cl_diag.errors import UserError
from cl_diag.options import (
    CLI,
    DEVICES,
    LABELS_KEY,
    MAX_BATCH,
    MAX_BLOCK_SIZE,
    MAX_HIST_BINS,
    MAX_IMAGE_SIZE,
    MAX_INSTANCES,
    MAX_NAME,
    MAX_NUM_PAIRS,
    MAX_SEED,
    MAX_VIEWS,
    MAX_WORKERS,
    PAIR_MODES,
    PROBES,
    OptionTable,
    Product,
    Spelling,
    check_values,
    option,
    shown,
    split_keys,
)
from cl_diag.vocabulary import LAYERS, RESULT_NAME

__all__ = [
    "ANALYSIS_FILES",
    "ANALYZE",
    "EMBEDDINGS_FIELDS",
    "FILE_FIELDS",
    "MEASURE",
    "MODULE_INPUT",
    "PROBES",
    "AnalyzeConfig",
    "PairOptions",
    "check_analysis",
    "from_command_line",
    "option_names",
]

#: the files of an analysis folder whose names are fixed (the figures are listed as written)
ANALYSIS_FILES = (RESULT_NAME, "report.md", "report.html")

#: ``AnalyzeConfig.input`` of an analysis of modules passed from Python (there is no file).
MODULE_INPUT = Path("<nn.Module>")

#: options of ``analyze`` recorded (``commands.analyze``) under an earlier name -> their name
#: now: the encoding batch was ``batch_size`` until ``--batch-size`` came to mean the training
#: batch in every command (issue 20); the value means the same
_RENAMED = {"batch_size": "encode_batch_size"}


@dataclass(frozen=True)
class PairOptions:
    """How the pair statistics are measured: the "Pairs" options of ``cl-diag analyze``, and
    the keyword arguments of :func:`cl_diag.measure`."""

    pairs: str = "exact"
    num_pairs: int = 5000
    seed: int = 0
    block_size: int | None = None
    hist_bins: int = 100

    @classmethod
    def checked(
        cls, n_ref: Any = None, *, spelling: Spelling = CLI, **options: Any
    ) -> tuple[PairOptions, int | None]:
        """The pair options and ``n_ref`` checked against their declarations
        (:data:`MEASURE`) and normalised (a numpy integer is a whole
        number); an :class:`~cl_diag.options.OptionError` names the option as ``spelling``
        spells it: ``--n-ref`` on the command line, ``n_ref`` in Python."""
        values = check_values({"n_ref": n_ref, **options}, MEASURE, spelling=spelling)
        n_ref = values.pop("n_ref")
        return cls(**values), n_ref


# the panels of ``cl-diag analyze --help``
PAIRS, EMBEDDINGS, CHECKPOINTS, FOREIGN, RUNNING = (
    "Pairs",
    "Embeddings files",
    "Checkpoints",
    "Foreign checkpoints",
    "Running",
)


@dataclass
class AnalyzeConfig:
    """One field per option of ``cl-diag analyze`` (:func:`cl_diag.options.option`: its
    type, default, bounds, ``--help`` text and panel); :data:`ANALYZE` is their table and the
    command's parameters are made from them. Tags: ``file``, an option that describes a
    checkpoint file (refused for an embeddings file; :func:`cl_diag.analyze` of modules takes
    none); ``embeddings``, one that describes an embeddings file's arrays (refused for a
    checkpoint). The field order is the order result.json records them in."""

    input: Path = option(
        MISSING,
        "",
        "An embeddings file (.npz/.pt with z1, z2[, labels]), a cl-diag checkpoint (last.pt), a "
        "solo-learn, lightly, MoCo or DINO checkpoint, or a torchvision ResNet or timm state dict "
        "(with --arch); any other file with --backbone-prefix.",
        argument="source",
        tags=("file",),
    )
    out: Path = option(
        MISSING,
        "",
        "Output folder \\[default: <source>-analysis].",
        flags=("--out", "-o"),
        cli=(Path | None, None),
        tags=("file",),
    )
    n_ref: int | None = option(
        None,
        PAIRS,
        "Training-set size n of the threshold -1/(n-1) \\[default: the checkpoint's training-set "
        "size; for an embeddings file, its number of rows].",
        low=2,
        hint="the threshold -1/(n_ref - 1) counts the training instances, e.g. 50000 for CIFAR",
    )
    pairs: str = option(
        "exact",
        PAIRS,
        "'exact' (all pairs, streamed), 'sampled' (--num-pairs per type) or 'moments' (exact "
        "means and variances over all pairs in O(n d^2), the rest from --num-pairs sampled pairs "
        "per type: for n in the millions).",
        choices=PAIR_MODES,
    )
    num_pairs: int = option(
        5000,
        PAIRS,
        "Pairs drawn per type in sampled and moments modes (the paper uses 5,000).",
        low=1,
        high=MAX_NUM_PAIRS,
        hint="for more, use {pairs} exact, which visits every pair",
    )
    seed: int = option(
        0,
        PAIRS,
        "Seed of the sampled images, their augmentations, sampled pairs and probes.",
        low=0,
        high=MAX_SEED,
        hint="what numpy and torch generators take",
    )
    block_size: int | None = option(
        None,
        PAIRS,
        "Rows per streamed block \\[default: from a memory budget].",
        low=1,
        high=MAX_BLOCK_SIZE,
        hint="a tile of b x b similarities takes about 16 b^2 bytes; omit it for the default",
    )
    hist_bins: int = option(
        100,
        PAIRS,
        "Bins of the stored histogram on [-1, 1].",
        low=1,
        high=MAX_HIST_BINS,
        hint="the reports show 100",
    )
    keys: str | None = option(
        None,
        EMBEDDINGS,
        "Embeddings files: the two arrays that are the views, view 1 first, e.g. "
        "image_embeds,text_embeds \\[default: z1,z2]. Naming them also measures the modality "
        "gap (see --cross-modal).",
        hint="two array names, e.g. image_embeds,text_embeds",
        tags=("embeddings",),
    )
    labels: str | None = option(
        None,
        EMBEDDINGS,
        "Embeddings files: the array of class labels, one integer per row \\[default: labels]. "
        "With labels the linear, kNN and k-means probes run on view 1's rows and the class "
        "collapse is measured.",
        hint="an array name, e.g. class_ids",
        max_length=MAX_NAME,
        tags=("embeddings", "recorded-when-set"),
    )
    cross_modal: bool | None = option(
        None,
        EMBEDDINGS,
        "Embeddings files: the two views come from two encoders (image and text...): measure the "
        "modality gap between their centroids and what removing it does to the cross-view "
        "statistics \\[default: on with --keys, else off].",
        flags=("--cross-modal/--no-cross-modal",),
        tags=("embeddings",),
    )
    num_images: int = option(
        5000,
        CHECKPOINTS,
        "Training images sampled (seeded) and augmented twice to make the two views.",
        low=2,
        high=MAX_INSTANCES,
        hint="negatives need two instances",
    )
    layers: tuple[str, ...] = option(
        LAYERS,
        CHECKPOINTS,
        f"Layers measured: comma-separated subset of {', '.join(LAYERS)}, or all.",
        cli=(str, ",".join(LAYERS)),
    )
    probes: tuple[str, ...] = option(
        PROBES,
        CHECKPOINTS,
        f"Probes: all, none, or a comma-separated subset of {', '.join(PROBES)}. An embeddings "
        "file gets retrieval (both directions, --pairs exact); the others need a dataset's "
        "labelled splits.",
        cli=(str, "all"),
    )
    baselines: bool = option(
        True,
        CHECKPOINTS,
        "Also run the probes on raw pixels and on the architecture at random initialisation.",
    )
    probe_train_images: int | None = option(
        None,
        CHECKPOINTS,
        "Probe on this many (seeded) images of the train split \\[default: all].",
        low=2,
        high=MAX_INSTANCES,
    )
    probe_test_images: int | None = option(
        None,
        CHECKPOINTS,
        "Probe on this many (seeded) images of the test split \\[default: all].",
        low=2,
        high=MAX_INSTANCES,
    )
    validation_fraction: float | None = option(
        None,
        CHECKPOINTS,
        "Hold out this share of the probes' train split (seeded by --seed, stratified by class) "
        "as a validation split: the linear probe is also fitted on the rest and scored on it, "
        "the accuracy to choose a training option on (e.g. a VRN weight) without the test "
        "split. The test-split probes are unchanged \\[default: no validation split].",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        hint="the share of the probes' train split held out as a validation split, e.g. 0.2",
        tags=("recorded-when-set",),
    )
    arch: str | None = option(
        None,
        FOREIGN,
        "Backbone of a foreign checkpoint: resnet18-cifar, resnet18, resnet34-cifar, resnet34, "
        "resnet50-cifar, resnet50, or timm:NAME (any timm model, built with pretrained=False) "
        "\\[default: from args.json beside a solo-learn .ckpt, MoCo's 'arch', DINO's 'args'].",
        max_length=MAX_NAME,
        tags=("file",),
    )
    dataset: str | None = option(
        None,
        FOREIGN,
        "Dataset of a foreign checkpoint: digits (the embedded 8x8 digits: no download), "
        "cifar10, cifar100 or imagefolder \\[default: from args.json].",
        tags=("file",),
    )
    data_root: Path | None = option(
        None,
        CHECKPOINTS,
        "Folder holding cifar-10-batches-py/ or cifar-100-python/, or the ImageFolder train root "
        "[default for cl-diag checkpoints: the one they were trained with].",
        tags=("file",),
    )
    val_root: Path | None = option(
        None,
        CHECKPOINTS,
        "ImageFolder root of the test split (imagefolder only).",
        tags=("file",),
    )
    cifar_stem_padding: int | None = option(
        None,
        FOREIGN,
        "Padding of the 3x3 CIFAR stem (not stored in the weights) \\[default: 2 for upstream "
        "solo-learn, 1 for the paper's fork (BN in the projector or add_vrn_loss_term in "
        "args.json) and plain state dicts].",
        low=0,
        high=8,
        tags=("file",),
    )
    encoder: str | None = option(
        None,
        FOREIGN,
        "Which encoder of a two-encoder checkpoint: MoCo query or key \\[default: query], DINO "
        "teacher or student \\[default: teacher].",
        tags=("file",),
    )
    backbone_prefix: str | None = option(
        None,
        FOREIGN,
        "Read any file: the keys under this prefix are the backbone (prefix removed; '' for every "
        "key outside --projector-prefix). The error for an unknown layout lists the file's "
        "prefixes.",
        tags=("file",),
    )
    projector_prefix: str | None = option(
        None,
        FOREIGN,
        "With --backbone-prefix: the keys under this prefix are the projector (an nn.Sequential "
        "of Linear, BatchNorm1d and activations).",
        tags=("file",),
    )
    renames: tuple[str, ...] = option(
        (),
        FOREIGN,
        "'REGEX=REPLACEMENT' applied to every key (re.sub, split at the last '='), before the "
        "layout is recognised and the strict key check; repeatable, applied in order. E.g. "
        "--rename '^module\\.encoder\\.=backbone.'",
        flags=("--rename",),
        cli=(list[str] | None, None),
        tags=("file",),
    )
    device: str = option("auto", RUNNING, "auto (CUDA when present), cpu or cuda.", choices=DEVICES)
    encode_batch_size: int = option(
        512,
        RUNNING,
        "Images per encoding batch (of the views and of the probes' splits).",
        low=1,
        high=MAX_BATCH,
        hint="images per encoding batch",
    )
    workers: int | None = option(
        None,
        RUNNING,
        "DataLoader worker processes \\[default: 0 on CPU, up to 8 on CUDA].",
        low=0,
        high=MAX_WORKERS,
        hint="DataLoader worker processes",
    )
    amp: bool = option(True, RUNNING, "fp16 autocast and channels_last while encoding on CUDA.")
    overwrite: bool = option(
        False,
        RUNNING,
        "Replace files in --out that cl-diag did not write (or that changed since): without it "
        "such files stop the command.",
    )
    views: int = option(
        2,
        CHECKPOINTS,
        "Augmented views per image (V >= 2; exact pairs): positives and cross-view negatives over "
        "every view pair, within-view negatives in every view. V = 2 is the default result.",
        low=2,
        high=MAX_VIEWS,
        hint="two views make a positive",
    )
    image_size: int | None = option(
        None,
        CHECKPOINTS,
        "Side in pixels of the images encoded \\[default: the training size the checkpoint "
        "records (a cl-diag config, solo-learn's crop_size, a Lightning checkpoint's "
        "hyper_parameters); else the dataset's own: 32 for CIFAR, 8 for digits; an image folder "
        "with no record: 224, a guess, with a warning]. A side other than the recorded one is "
        "measured with a warning. Digits are resized to it (and repeated to 3 channels for a "
        "foreign model).",
        low=1,
        high=MAX_IMAGE_SIZE,
        hint="the crop side in pixels",
        tags=("file",),
    )

    def record(self) -> dict[str, Any]:
        """Every option that made the result, as JSON values (paths as text, tuples as lists):
        result.json's ``commands.analyze``, what ``cl-diag reproduce`` runs again
        (:meth:`from_record`). Where the files go (``out``, ``overwrite``) is left out: the
        same analysis written to two folders is the same bytes."""
        out: dict[str, Any] = {}
        for f in fields(AnalyzeConfig):
            if f.name in ("out", "overwrite"):
                continue
            if f.name in RECORDED_WHEN_SET and getattr(self, f.name) is None:
                continue  # added later: an analysis without it records what it always did
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_record(cls, values: Mapping[str, Any]) -> AnalyzeConfig:
        """The config :meth:`record` wrote (JSON's lists and strings back into tuples and
        paths; ``out`` "." unless given; an option recorded under its earlier name, in
        :data:`_RENAMED`, read under its name now); a key this version does not know is a
        :class:`UserError`."""
        import typing

        hints = typing.get_type_hints(AnalyzeConfig)
        known = {f.name for f in fields(AnalyzeConfig)}
        values = {_RENAMED.get(k, k): v for k, v in values.items()}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UserError(
                f"The recorded analysis options name {', '.join(unknown)}, which this cl-diag "
                "does not know; reproduce it with the cl-diag version that wrote it."
            )
        out = {"out": Path("."), **values}
        for f in fields(AnalyzeConfig):
            value = out.get(f.name)
            if value is None:
                continue
            hint = hints[f.name]
            if Path in (hint, *typing.get_args(hint)):
                if not isinstance(value, (str, PurePath)):
                    raise _bad_record(f.name, value, "a path")
                out[f.name] = Path(value)
            elif typing.get_origin(hint) is tuple:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise _bad_record(f.name, value, "a list of names")
                out[f.name] = tuple(value)
        return cls(**out)

    @property
    def view_keys(self) -> tuple[str, str] | None:
        """The two arrays ``keys`` names (checked by :func:`check_analysis`), or None."""
        return split_keys(self.keys, labels=self.labels_key)

    @property
    def labels_key(self) -> str:
        """The array of class labels of an embeddings file (``labels`` unless named)."""
        return self.labels.strip() if self.labels is not None else LABELS_KEY

    @property
    def two_encoders(self) -> bool:
        """Whether the views come from two encoders (the modality gap is measured):
        ``cross_modal`` when given, else whether ``keys`` names the two arrays."""
        return self.cross_modal if self.cross_modal is not None else self.keys is not None

    @property
    def pair_options(self) -> PairOptions:
        return PairOptions(
            pairs=self.pairs,
            num_pairs=self.num_pairs,
            seed=self.seed,
            block_size=self.block_size,
            hist_bins=self.hist_bins,
        )


#: Every option of ``cl-diag analyze``, as :class:`AnalyzeConfig` declares it.
ANALYZE = OptionTable.of(
    AnalyzeConfig,
    "analyze",
    (
        # one encoding batch of images: batch x 3 channels x side^2 float32 numbers
        Product(
            ("encode_batch_size", "image_size", "image_size"),
            1 << 30,
            "one encoding batch of images (3 channels)",
            "encode_batch_size",
            factor=3,
        ),
    ),
)
#: ``cl_diag.measure``'s keywords: the pair options.
MEASURE = ANALYZE.only((o.name for o in ANALYZE.options if o.panel == PAIRS), name="measure")
#: The fields that describe a file, not a measurement (``cl_diag.analyze`` of modules takes
#: none), and those that describe an embeddings file's arrays (refused for a checkpoint).
FILE_FIELDS = ANALYZE.tagged("file")
EMBEDDINGS_FIELDS = ANALYZE.tagged("embeddings")
#: options added after results were committed (tag ``recorded-when-set``, as train's): recorded
#: in ``commands.analyze`` only when set, so an analysis without them records the same bytes
RECORDED_WHEN_SET = ANALYZE.tagged("recorded-when-set")


def from_command_line(values: Mapping[str, Any]) -> AnalyzeConfig:
    """The config of ``cl-diag analyze``'s parsed options (a probe suite's merged in): the
    command line's forms read into the fields -- ``--out`` defaults to
    ``<source>-analysis``, ``--layers``/``--probes`` are words (:func:`option_names`),
    ``--rename`` repeats."""
    config = {f.name: values[f.name] for f in fields(AnalyzeConfig)}
    source = config["input"]
    return AnalyzeConfig(
        **{
            **config,
            "out": config["out"] if config["out"] is not None else default_out(source),
            "layers": option_names(config["layers"], LAYERS, "layers", none=False),
            "probes": option_names(config["probes"], PROBES, "probes"),
            "renames": tuple(config["renames"] or ()),
        }
    )


def default_out(source: Path) -> Path:
    """``analyze``'s output folder when ``--out`` is not given."""
    return source.parent / f"{source.stem}-analysis"


def _bad_record(name: str, value: object, kind: str) -> UserError:
    return UserError(
        f"The recorded analysis option {name} = {shown(value)} is not {kind}: the record is "
        "damaged. "
        "Give an intact result.json (the one cl-diag analyze wrote)."
    )


def option_names(
    value: object,
    allowed: tuple[str, ...],
    option: str,
    *,
    none: bool = True,
    spelling: Spelling = CLI,
) -> tuple[str, ...]:
    """The names an option such as ``--probes`` or ``--layers`` gives, in the command line's
    words for the command line and Python alike: ``"all"`` (every name of ``allowed``),
    ``"none"`` (no name; only where ``none``) or a comma-separated subset of ``allowed``
    (case and spaces ignored); from Python also a list or tuple of names. ``option`` is the
    field name; a bad value is a :class:`UserError` that shows it as given (``--probes 'x'``
    on the command line, ``probes='x'`` in Python: ``spelling``) and offers the valid
    choices."""
    cli = spelling.style == "cli"
    names: tuple[str, ...] | None = None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "all":
            return allowed
        if text == "none" and none:
            return ()
        names = tuple(part.strip() for part in text.split(",") if part.strip())
    elif not cli and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = tuple(v.strip().lower() for v in value)
        if not names and none:
            return ()
    if not names or any(name not in allowed for name in names):
        offer = "'all', 'none'" if none else "'all'"
        listed = "" if cli else " (as a string, or a list of names)"
        raise UserError(
            spelling.message(
                f"{spelling.given(option, value)}: give {offer} or a comma-separated subset "
                f"of {', '.join(allowed)}{listed}."
            )
        )
    return names


def check_analysis(config: AnalyzeConfig, *, spelling: Spelling = CLI) -> AnalyzeConfig:
    """Every check of ``config`` that needs no input file: each option against its
    declaration (:data:`ANALYZE`, named as ``spelling`` spells it), the relations between
    options, the device, and that ``config.out`` can take the outputs. Returns ``config``
    normalised; UserError for the first problem; nothing is written."""
    values = {f.name: getattr(config, f.name) for f in fields(AnalyzeConfig)}
    config = replace(config, **check_values(values, ANALYZE, spelling=spelling))
    split_keys(config.keys, spelling, labels=config.labels_key)  # two arrays, neither the labels
    if config.labels is not None and not config.labels.strip():
        raise UserError(f"{spelling.name('labels')} is empty: name the labels' array.")
    if config.views > 2 and config.pairs != "exact":
        cli = spelling.style == "cli"  # as typed: --pairs moments; pairs='moments' in Python
        pairs = f"--pairs {config.pairs}" if cli else spelling.given("pairs", config.pairs)
        raise UserError(
            f"{spelling.given('views', config.views)} is measured with exact pairs; drop {pairs}."
        )
    if not config.layers or any(layer not in LAYERS for layer in config.layers):
        raise UserError(
            f"{spelling.name('layers')} takes a comma-separated subset of {', '.join(LAYERS)} "
            f"(got {', '.join(map(str, config.layers)) or 'nothing'})."
        )
    bad = [probe for probe in config.probes if probe not in PROBES]
    if bad:
        raise UserError(
            f"{spelling.name('probes')} takes 'none', 'all' or a comma-separated subset of "
            f"{', '.join(PROBES)} (got {', '.join(map(str, bad))})."
        )
    if config.device == "cuda":  # without CUDA: refused before any work (auto, cpu need none)
        from cl_diag.runtime import resolve_device

        resolve_device(config.device)
    # here, not at the top: the CLI imports this module for its defaults, to print help
    from cl_diag.io.output import check_targets, ensure_writable_parent

    ensure_writable_parent(config.out)  # fail before the measuring, not after
    check_targets(config.out, ANALYSIS_FILES, overwrite=config.overwrite, kind="analysis")
    return config
