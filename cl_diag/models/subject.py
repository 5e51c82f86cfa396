"""A trained encoder made ready for measuring, whatever checkpoint it came from (the data it
was trained on is opened a layer up, by :func:`cl_diag.orchestration.subject.open_subject`).

:func:`rebuild_subject` turns a :class:`~cl_diag.models.checkpoints.CheckpointFile` into a
:class:`Subject`: the trained backbone and projector in eval mode, the same architecture at a
seeded random initialisation (the probes' baseline), the training config in ``cl-diag
train``'s vocabulary, a ``source`` record for result.json, and a :class:`DataSpec` naming
the data. A cl-diag checkpoint is rebuilt from its stored config and must fit it exactly (a
``toy`` run carries its learned vectors instead of an encoder); a foreign one by
:func:`~cl_diag.models.foreign.load_foreign_encoder`. :func:`module_subject` makes a subject
of any ``nn.Module`` passed from Python, re-initialised for the baseline where every
parameter's module can reset itself.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError
from cl_diag.measurement.convergence import curve_columns, loss_trend
from cl_diag.models.build import build_model, seeded
from cl_diag.models.checkpoints import CheckpointFile, check_checkpoint
from cl_diag.models.foreign import lightning_metadata, load_foreign_encoder
from cl_diag.models.keymap import KeyMapping
from cl_diag.models.registry import get_arch

__all__ = [
    "FOREIGN_CHANNELS",
    "FOREIGN_DATASETS",
    "MODULE_DATASETS",
    "DataSpec",
    "Subject",
    "module_subject",
    "random_twin",
    "rebuild_subject",
]

#: Datasets a foreign checkpoint can be measured on (digits: grey 8x8 images, resized to the
#: analysis side and repeated to the model's 3 channels).
FOREIGN_DATASETS = ("digits", "cifar10", "cifar100", "imagefolder")
#: Input channels of every foreign backbone (torchvision's and timm's ImageNet stems).
FOREIGN_CHANNELS = 3
#: Datasets a module passed from Python can be measured on (the image datasets).
MODULE_DATASETS = ("digits", "cifar10", "cifar100", "imagefolder")


@dataclass(frozen=True)
class DataSpec:
    """The data a subject was trained on, as its checkpoint and the user's options name it, and
    what is known of its image side (decided a layer up, by
    :func:`cl_diag.orchestration.subject.resolve_image_size`): a side the model asks for
    (``image_size``, ``image_size_from``; ``fixed_size``: the only one it takes), the training side
    the config records (``trained_size``, ``trained_size_from``; from without a size: the dataset's
    own), the model's input ``channels``, and the smallest side such a model usually trains at."""

    dataset: str  # digits, cifar10, cifar100 or imagefolder
    data_root: str | None
    val_root: str | None
    image_size: int | None  # None: resolved from trained_size or the dataset's own size
    num_samples: int | None  # the run trained on the first N images only
    split: dict[str, Any] | None = None  # the train/test split the checkpoint recorded
    image_size_from: str | None = None
    fixed_size: bool = False
    trained_size: int | None = None
    trained_size_from: str | None = None
    channels: int | None = None  # the model's input channels (None: the data's own)
    #: the smallest side such a model is usually trained at (a foreign ResNet or timm model:
    #: CIFAR's 32 px), and what it is: analysing far below it is worth a word
    smallest_usual_size: int | None = None
    smallest_usual_from: str | None = None


@dataclass
class Subject:
    """A trained encoder made ready for measuring, whatever file it came from."""

    source: dict  # result.json's "source" (kind, format, path, arch, ..., weights_sha256)
    training_config: dict
    n_train: int | None
    dataset: str | None
    backbone: nn.Module | None = None
    projector: nn.Module | None = None
    random_backbone: nn.Module | None = None
    random_projector: nn.Module | None = None
    two_views: Any = None  # TwoViews over the training set
    eval_split: Callable[[str], Any] | None = None  # "train"/"test" -> (image, label) dataset
    splits: dict[str, Any] = field(default_factory=dict)  # the opened evaluation splits
    embeddings: tuple[torch.Tensor, torch.Tensor] | None = None  # toy: the learned vectors
    data_spec: DataSpec | None = None  # the data to attach (None for toy runs)
    # toy with --num-classes: the classes of the learned vectors (None: each its own class)
    embedding_labels: torch.Tensor | None = None
    # a cl-diag checkpoint: every training option as its run recorded them (result.json's
    # commands.train, what `cl-diag reproduce` trains again); None for any other file
    training_command: dict | None = None


def _loss_record(metrics: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The training loss's last windows from a checkpoint's metrics rows (checked numbers,
    :func:`~cl_diag.models.checkpoints.check_checkpoint`), for result.json's ``source.loss``;
    None when the rows hold too few steps (:func:`~cl_diag.measurement.convergence.loss_trend`)."""
    trend = loss_trend(metrics)
    if trend is None:
        return None
    contrastive = loss_trend(metrics, "contrastive")
    return {
        "steps": trend.steps,
        "final": trend.final,
        "final_steps": trend.final_steps,
        "before": trend.before,
        "before_steps": trend.before_steps,
        "change": trend.change,
        "change_se": trend.change_se,
        "contrastive": None if contrastive is None else contrastive.final,
    }


def _plain_record(value: Any) -> dict | None:
    """``value`` if it is a record of plain JSON values (nested dicts of text keys, numbers,
    text, booleans, None and lists of those), else None: a file's fingerprint is shown and
    written back into result.json, never trusted to hold anything else."""

    def plain(v: Any) -> bool:
        if v is None or isinstance(v, (str, bool, int, float)):
            return True
        if isinstance(v, list):
            return all(plain(x) for x in v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        return False

    return value if isinstance(value, dict) and plain(value) else None


def rebuild_subject(
    file: CheckpointFile,
    *,
    arch: str | None = None,
    dataset: str | None = None,
    cifar_stem_padding: int | None = None,
    data_root: Path | None = None,
    val_root: Path | None = None,
    seed: int = 0,
    run_record_fields: Collection[str] = (),
    encoder: str | None = None,
    mapping: KeyMapping | None = None,
) -> Subject:
    """Rebuild the model in ``file`` and name the data it was trained on (``data_spec``);
    UserError for every mismatch between the file and the options. ``arch``, ``dataset``,
    ``cifar_stem_padding``, ``encoder`` and ``mapping`` describe a foreign checkpoint (a cl-diag
    checkpoint records its model); ``data_root``/``val_root`` override a cl-diag checkpoint's
    roots; ``seed`` draws the random-init twin; ``run_record_fields`` are config keys left out of
    ``training_config`` (where and how a run ran, not what it computed).
    """
    if file.kind == "cl-diag":
        options = {"--encoder": encoder, **_mapping_options(mapping)}
        given = next((name for name, value in options.items() if value is not None), None)
        if given is not None:
            raise UserError(
                f"{given} applies to foreign checkpoints only; {file.path} is a cl-diag "
                "checkpoint, which records its model. Drop the option."
            )
        return _cl_diag_subject(
            file,
            dataset=dataset,
            arch=arch,
            cifar_stem_padding=cifar_stem_padding,
            data_root=data_root,
            val_root=val_root,
            seed=seed,
            run_record_fields=run_record_fields,
        )
    return _foreign_subject(
        file,
        arch=arch,
        dataset=dataset,
        cifar_stem_padding=cifar_stem_padding,
        data_root=data_root,
        val_root=val_root,
        seed=seed,
        which=encoder,
        mapping=mapping,
    )


def _mapping_options(mapping: KeyMapping | None) -> dict[str, Any]:
    if mapping is None:
        return {}
    return {
        "--backbone-prefix": mapping.backbone_prefix,
        "--projector-prefix": mapping.projector_prefix,
        "--rename": mapping.renames or None,
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_str(path: Path | None, recorded: Any) -> str | None:
    return str(path) if path is not None else recorded


def _cl_diag_subject(
    file: CheckpointFile,
    *,
    dataset: str | None,
    arch: str | None,
    cifar_stem_padding: int | None,
    data_root: Path | None,
    val_root: Path | None,
    seed: int,
    run_record_fields: Collection[str],
) -> Subject:
    for option, value in (("--arch", arch), ("--cifar-stem-padding", cifar_stem_padding)):
        if value is not None:
            raise UserError(
                f"{option} applies to foreign checkpoints only; {file.path} is a cl-diag "
                "checkpoint, which records its model. Drop the option."
            )
    ck = check_checkpoint(file.payload, file.path)  # already read once: validate, do not reload
    cfg = dict(ck.get("config") or {})
    recorded = dict(cfg)
    recorded_roots = {"data_root": cfg.get("data_root"), "val_root": cfg.get("val_root")}
    # Where and how the run ran (paths, device, workers) is not what it computed; leaving it
    # out keeps compare's run labels to the options that matter.
    cfg = {k: v for k, v in cfg.items() if k not in run_record_fields}
    trained_on = str(ck.get("dataset") or cfg.get("dataset"))
    if dataset is not None and dataset != trained_on:
        raise UserError(
            f"{file.path} was trained on {trained_on}; --dataset {dataset} cannot change that. "
            "Drop --dataset."
        )
    source = {
        "format": "cl-diag",
        "path": str(file.path),
        "arch": cfg.get("arch"),
        "dataset": trained_on,
        "n_train": ck.get("n_train"),
        "epoch": ck.get("epoch"),
        "step": ck.get("step"),
        "complete": ck.get("complete"),
        "versions": ck.get("versions"),
        # where it was trained: the fingerprint last.pt records (None before cl-diag wrote one)
        "environment": _plain_record(ck.get("environment")),
    }
    # whether it reached a plateau and its final loss (claims about an optimum read them)
    metrics = ck.get("metrics") or []
    if (loss := _loss_record(metrics)) is not None:
        source["loss"] = loss
    # the rows as columns, for the report's training curves (the run folder's figure)
    if (columns := curve_columns(metrics)) is not None:
        source["curves"] = {"rows": len(metrics), "columns": columns}
    subject = Subject(
        source=source,
        training_config=cfg,
        n_train=ck.get("n_train"),
        dataset=trained_on,
        training_command=recorded,
    )
    if trained_on == "toy":
        emb = ck.get("embeddings")
        if not isinstance(emb, dict) or "z1" not in emb or "z2" not in emb:
            raise UserError(
                f"{file.path} is a toy-dataset checkpoint without its 'embeddings'; it is damaged."
            )
        subject.embeddings = (emb["z1"].float(), emb["z2"].float())
        # their classes (--num-classes) are the data's: cl_diag.orchestration.subject adds them
        return subject

    try:
        model = build_model(cfg)
        random_model = build_model(cfg, seed=seed)
    except (ValueError, KeyError) as exc:
        raise UserError(
            f"The config stored in {file.path} does not describe a model cl-diag can build: {exc}."
        ) from None
    try:
        model.backbone.load_state_dict(ck["backbone"], strict=True)
        model.projector.load_state_dict(ck["projector"], strict=True)
    except RuntimeError as exc:
        raise UserError(
            f"The weights in {file.path} do not fit the model its config describes "
            f"({_first_line(exc)}); the checkpoint is damaged or from an incompatible cl-diag "
            "version."
        ) from None
    subject.backbone, subject.projector = model.backbone.eval(), model.projector.eval()
    subject.random_backbone = random_model.backbone.eval()
    subject.random_projector = random_model.projector.eval()
    source["arch"] = model.arch
    subject.data_spec = DataSpec(
        trained_on,
        data_root=_as_str(data_root, recorded_roots["data_root"]),
        val_root=_as_str(val_root, recorded_roots["val_root"]),
        image_size=None,
        num_samples=cfg.get("num_samples"),
        split=ck.get("split"),
        trained_size=cfg.get("image_size"),
        trained_size_from=(
            "the checkpoint's config.image_size"
            if cfg.get("image_size") is not None
            else f"cl-diag train's default for {trained_on}"
        ),
    )
    return subject


def _foreign_subject(
    file: CheckpointFile,
    *,
    arch: str | None,
    dataset: str | None,
    cifar_stem_padding: int | None,
    data_root: Path | None,
    val_root: Path | None,
    seed: int,
    which: str | None,
    mapping: KeyMapping | None,
) -> Subject:
    encoder = load_foreign_encoder(
        file,
        arch=arch,
        dataset=dataset,
        cifar_stem_padding=cifar_stem_padding,
        encoder=which,
        mapping=mapping,
    )
    trained_on = encoder.dataset
    if trained_on is None:
        raise UserError(
            f"{file.path} does not record its dataset (no args.json beside it): give --dataset "
            f"({', '.join(FOREIGN_DATASETS)}), and --data-root for all but digits (the embedded "
            "8x8 digits, e.g. --dataset digits to try a model at once)."
        )
    note = None
    if trained_on not in FOREIGN_DATASETS:
        if dataset is not None:
            raise UserError(
                f"--dataset {trained_on!r} is not one of {', '.join(FOREIGN_DATASETS)}."
            )
        # solo-learn's imagenet, imagenet100, stl10 and custom runs read class folders.
        note = (
            f"args.json names dataset {trained_on!r}; read as imagefolder from "
            "--data-root/--val-root"
        )
        trained_on = "imagefolder"
    if encoder.num_classes is not None and trained_on in ("cifar10", "cifar100"):
        expected = 10 if trained_on == "cifar10" else 100
        if encoder.num_classes != expected:
            raise UserError(
                f"The checkpoint's online classifier has {encoder.num_classes} classes but "
                f"{trained_on} has {expected}; give the --dataset it was trained on."
            )
    source = {
        "format": encoder.kind,
        "path": str(file.path),
        "arch": encoder.arch,
        "dataset": trained_on,
        "projector_layout": encoder.projector_layout,
        "cifar_stem_padding": encoder.cifar_stem_padding,
        "args_json": encoder.args_path,
        "provenance": encoder.provenance,
        "ignored_modules": encoder.ignored,
        **lightning_metadata(file.payload),
        "layout": encoder.layout,
    }
    if note:
        source["note"] = note
    random_backbone, random_projector = encoder.random_init(seed)
    subject = Subject(
        source=source,
        training_config=dict(encoder.training_config),
        n_train=None,
        dataset=trained_on,
        backbone=encoder.backbone,
        projector=encoder.projector,
        random_backbone=random_backbone,
        random_projector=random_projector,
    )
    spec = get_arch(encoder.arch)
    size = why = None
    if spec.input_size is not None:
        # a ViT's position embeddings are laid out for one image side: crop to it
        size, why = spec.input_size, f"the fixed input size of {spec.name}"
    elif spec.cifar_stem and trained_on == "imagefolder":
        # A CIFAR-stem network measured on an image folder sees the images at CIFAR's size.
        size, why = 32, f"CIFAR's side, for the CIFAR stem of {spec.name}"
    trained = encoder.training_config.get("image_size")
    subject.data_spec = DataSpec(
        trained_on,
        data_root=_as_str(data_root, None),
        val_root=_as_str(val_root, None),
        image_size=size,
        num_samples=None,
        image_size_from=why,
        fixed_size=spec.input_size is not None,
        trained_size=trained if isinstance(trained, int) else None,
        trained_size_from=encoder.provenance.get("image_size") if trained else None,
        channels=FOREIGN_CHANNELS,
        smallest_usual_size=32 if spec.convolutional else None,
        smallest_usual_from=f"CIFAR's side, the smallest a {spec.name} is usually trained at",
    )
    return subject


# --------------------------------------------------------------------------- any nn.Module


def random_twin(module: nn.Module, seed: int) -> tuple[nn.Module | None, str | None]:
    """``module`` re-initialised under ``seed`` (a copy; the original is untouched), by the
    ``reset_parameters`` of every submodule that has one; or ``(None, why)`` when some
    parameter belongs to a module that cannot reset itself (a ViT's position embedding, an
    ``nn.MultiheadAttention``): such a twin would keep trained weights, so there is none."""
    stuck = [
        f"{prefix}.{name}" if prefix else name
        for prefix, owner in module.named_modules()
        if not callable(getattr(owner, "reset_parameters", None))
        for name, _ in owner.named_parameters(recurse=False)
    ]
    if stuck:
        more = f", ... ({len(stuck)} in all)" if len(stuck) > 4 else ""
        return None, (
            f"no random-init twin: {', '.join(stuck[:4])}{more} belong to modules without "
            "reset_parameters()"
        )
    twin = copy.deepcopy(module)
    with seeded(seed), torch.no_grad():
        for owner in twin.modules():
            reset = getattr(owner, "reset_parameters", None)
            if callable(reset):
                reset()
    return twin.eval(), None


def _qualname(module: nn.Module | None) -> str | None:
    if module is None:
        return None
    kind = type(module)
    return f"{kind.__module__}.{kind.__qualname__}"


def _check_materialised(name: str, module: nn.Module | None) -> None:
    """UserError for a module whose parameters or buffers are on the meta device (a shape and
    no values: built under ``torch.device("meta")`` and never loaded)."""
    if module is None:
        return
    meta = [
        key
        for key, tensor in [*module.named_parameters(), *module.named_buffers()]
        if tensor.is_meta
    ]
    if meta:
        more = f" (and {len(meta) - 1} more)" if len(meta) > 1 else ""
        raise UserError(
            f"The {name}'s {meta[0]}{more} is on the meta device: it has a shape but no values. "
            "Load its weights first (module.to_empty(device='cpu'), then load_state_dict)."
        )


def _read_features(module: nn.Module, output_key: str | None) -> nn.Module:
    from cl_diag.measurement.views import Features

    return Features(module, output_key)


def _read_projection(module: nn.Module | None) -> nn.Module | None:
    from cl_diag.measurement.views import Features

    if module is None:
        return None
    return Features(
        module,
        what="projector",
        fix="Give the projector that was trained on this encoder's output, or none.",
    )


def check_modules(backbone: object, projector: object = None) -> None:
    """UserError unless ``backbone`` is an ``nn.Module`` and ``projector`` one or None: what
    ``cl_diag.analyze`` checks first (a checkpoint's path given as the encoder is named)."""
    if not isinstance(backbone, nn.Module):
        hint = (
            f" A checkpoint file is analysed on the command line: cl-diag analyze {backbone}."
            if isinstance(backbone, (str, os.PathLike))
            else ""
        )
        raise UserError(
            f"encoder must be a torch.nn.Module (got {type(backbone).__name__}); pass the model "
            f"that maps an image batch to features.{hint}"
        )
    if projector is not None and not isinstance(projector, nn.Module):
        raise UserError(
            f"projector must be a torch.nn.Module or None (got {type(projector).__name__})."
        )


def module_subject(
    backbone: nn.Module,
    projector: nn.Module | None,
    *,
    dataset: str,
    data_root: Path | None = None,
    val_root: Path | None = None,
    training_config: Mapping[str, Any] | None = None,
    seed: int = 0,
    baselines: bool = True,
    output_key: str | None = None,
) -> Subject:
    """A :class:`Subject` of modules passed from Python, measured on ``dataset`` (one of
    :data:`MODULE_DATASETS`, read from ``data_root``/``val_root`` as the CLI does).
    ``training_config`` is what the theory panel reads; with ``baselines`` random-init twins are
    made where :func:`random_twin` can (the source says why not otherwise). A module on the meta
    device is refused.
    """
    check_modules(backbone, projector)
    if dataset not in MODULE_DATASETS:
        raise UserError(
            f"dataset {dataset!r} is not one of {', '.join(MODULE_DATASETS)}; give the name of "
            "the images to measure on (and data_root for cifar10, cifar100 and imagefolder)."
        )
    if output_key is not None and not isinstance(output_key, str):
        raise UserError(f"output_key must be a string (got {type(output_key).__name__}).")
    for name, module in (("encoder", backbone), ("projector", projector)):
        _check_materialised(name, module)
    source: dict[str, Any] = {
        "kind": "module",
        "format": "nn.Module",
        "arch": _qualname(backbone),
        "dataset": dataset,
        "projector": _qualname(projector),
    }
    subject = Subject(
        source=source,
        training_config=dict(training_config or {}),
        n_train=None,
        dataset=dataset,
        backbone=_read_features(backbone, output_key),
        projector=_read_projection(projector),
    )
    if baselines:
        twin, why = random_twin(backbone, seed)
        skipped = {"encoder": why} if why else {}
        twin_projector = None
        if projector is not None:
            twin_projector, why = random_twin(projector, seed + 1)
            if why:
                skipped["projector"] = why
        if skipped:  # a twin is the whole model or nothing
            source["random_init"] = skipped
        else:
            assert twin is not None
            subject.random_backbone = _read_features(twin, output_key)
            subject.random_projector = _read_projection(twin_projector)
    # the data is opened above models (cl_diag.orchestration.subject.open_module_subject),
    # which also decides the side (image_size, else the config's, else the dataset's own)
    trained = (training_config or {}).get("image_size")
    # a network whose first convolution takes 3 channels sees a grey digit repeated in each, as
    # the command line feeds a foreign model (else: "expected 3 channels, but got 1")
    colour = _first_convolution_channels(backbone) == FOREIGN_CHANNELS
    subject.data_spec = DataSpec(
        dataset,
        data_root=_as_str(data_root, None),
        val_root=_as_str(val_root, None),
        image_size=None,  # cl_diag.analyze's image_size is resolved with the rest, a layer up
        num_samples=None,
        trained_size=trained if isinstance(trained, int) else None,
        trained_size_from="training_config['image_size']" if isinstance(trained, int) else None,
        channels=FOREIGN_CHANNELS if colour else None,
        smallest_usual_size=32 if colour else None,
        smallest_usual_from="CIFAR's side, the smallest a colour CNN is usually trained at",
    )
    return subject


def _first_convolution_channels(module: nn.Module) -> int | None:
    """The input channels of the first 2-D convolution of ``module`` (what the images it is fed
    must have), or None when it has none."""
    for part in module.modules():
        if isinstance(part, nn.Conv2d):
            return int(part.in_channels)
    return None
