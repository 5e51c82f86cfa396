"""The options of ``cl-diag analyze`` (and of ``cl_diag.measure`` / ``cl_diag.analyze``) as
config dataclasses, and their checks that need no input: what the command line builds before
any heavy module is imported.

:class:`AnalyzeConfig` has one field per option of ``cl-diag analyze``; :class:`PairOptions`
the "Pairs" options (``cl_diag.measure``'s keywords). Their types and bounds are declared in
:data:`cl_diag.options.ANALYZE`; :func:`check_analysis` checks a config against them and
against the relations between options. :mod:`cl_diag.orchestration.analyze` measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path, PurePath
from typing import Any

from cl_diag.errors import UserError
from cl_diag.options import (
    ANALYZE,
    CLI,
    MEASURE,
    PROBES,
    Spelling,
    check_values,
    shown,
    split_keys,
)
from cl_diag.vocabulary import LAYERS, RESULT_NAME

__all__ = [
    "ANALYSIS_FILES",
    "EMBEDDINGS_FIELDS",
    "FILE_FIELDS",
    "MODULE_INPUT",
    "PROBES",
    "AnalyzeConfig",
    "PairOptions",
    "check_analysis",
    "option_names",
]

#: the files of an analysis folder whose names are fixed (the figures are listed as written)
ANALYSIS_FILES = (RESULT_NAME, "report.md", "report.html")

#: ``AnalyzeConfig.input`` of an analysis of modules passed from Python (there is no file).
MODULE_INPUT = Path("<nn.Module>")
#: AnalyzeConfig fields that describe a file, not a measurement: analyze_module takes none.
FILE_FIELDS = (
    "input",
    "out",
    "arch",
    "dataset",
    "data_root",
    "val_root",
    "cifar_stem_padding",
    "encoder",
    "backbone_prefix",
    "projector_prefix",
    "renames",
    "image_size",
)

#: AnalyzeConfig fields that describe an embeddings file: its two views' arrays (``--keys``)
#: and whether they come from two encoders (``--cross-modal``); refused for a checkpoint.
EMBEDDINGS_FIELDS = ("keys", "cross_modal")


#: options of ``analyze`` recorded (``commands.analyze``) under an earlier name -> their name
#: now: the encoding batch was ``batch_size`` until ``--batch-size`` came to mean the training
#: batch in every command (issue 20); the value means the same
_RENAMED = {"batch_size": "encode_batch_size"}

#: options added after results were committed, recorded in ``commands.analyze`` only when
#: set, so that an analysis that does not use them records the same bytes as before
_RECORDED_WHEN_SET = frozenset({"validation_fraction"})


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
        (:data:`cl_diag.options.MEASURE`) and normalised (a numpy integer is a whole
        number); an :class:`~cl_diag.options.OptionError` names the option as ``spelling``
        spells it: ``--n-ref`` on the command line, ``n_ref`` in Python."""
        values = check_values({"n_ref": n_ref, **options}, MEASURE, spelling=spelling)
        n_ref = values.pop("n_ref")
        return cls(**values), n_ref


@dataclass
class AnalyzeConfig:
    input: Path
    out: Path
    n_ref: int | None = None
    pairs: str = "exact"
    num_pairs: int = 5000
    seed: int = 0
    block_size: int | None = None
    hist_bins: int = 100
    # ---- embeddings files only (refused for a checkpoint)
    #: "A,B": the arrays that are the two views (default z1, z2)
    keys: str | None = None
    #: the views come from two encoders: measure the modality gap (None: when keys are named)
    cross_modal: bool | None = None
    # ---- checkpoints only (ignored for an embeddings file)
    num_images: int = 5000
    layers: tuple[str, ...] = LAYERS
    probes: tuple[str, ...] = PROBES
    baselines: bool = True
    probe_train_images: int | None = None  # None: the whole train split
    probe_test_images: int | None = None  # None: the whole test split
    # carve a seeded, stratified validation split of this share from the probes' train split:
    # the linear probe fitted on the rest and scored on it (None: no validation split)
    validation_fraction: float | None = None
    arch: str | None = None
    dataset: str | None = None
    data_root: Path | None = None
    val_root: Path | None = None
    cifar_stem_padding: int | None = None
    encoder: str | None = None  # MoCo: query | key; DINO: teacher | student
    backbone_prefix: str | None = None  # the user's key mapping (--backbone-prefix, ...)
    projector_prefix: str | None = None
    renames: tuple[str, ...] = ()  # 'REGEX=REPLACEMENT', applied in order
    device: str = "auto"
    # images per encoding batch (train's --batch-size is the training batch: another option)
    encode_batch_size: int = 512
    workers: int | None = None  # None: 0 on CPU, up to 8 on CUDA
    amp: bool = True
    # replace files in --out that cl-diag did not write (write_analysis)
    overwrite: bool = False
    # augmented views per image of a checkpoint (V > 2: pairs over every view pair)
    views: int = 2
    # the side of the images encoded (None: the training side the checkpoint records, else
    # the dataset's own; cl_diag.orchestration.subject.resolve_image_size)
    image_size: int | None = None

    def record(self) -> dict[str, Any]:
        """Every option that made the result, as JSON values (paths as text, tuples as lists):
        result.json's ``commands.analyze``, what ``cl-diag reproduce`` runs again
        (:meth:`from_record`). Where the files go (``out``, ``overwrite``) is left out: the
        same analysis written to two folders is the same bytes."""
        out: dict[str, Any] = {}
        for f in fields(AnalyzeConfig):
            if f.name in ("out", "overwrite"):
                continue
            if f.name in _RECORDED_WHEN_SET and getattr(self, f.name) is None:
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
        return split_keys(self.keys)

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
    declaration (:data:`cl_diag.options.ANALYZE`, named as ``spelling`` spells it), the
    relations between options, the device, and that ``config.out`` can take the outputs.
    Returns ``config`` normalised; UserError for the first problem; nothing is written."""
    values = {f.name: getattr(config, f.name) for f in fields(AnalyzeConfig)}
    declared = {k: v for k, v in values.items() if k in ANALYZE}
    config = replace(config, **check_values(declared, ANALYZE, spelling=spelling))
    split_keys(config.keys, spelling)  # two different arrays, neither the labels
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
