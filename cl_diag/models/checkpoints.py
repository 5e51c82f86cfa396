"""What the file a user brings to ``cl-diag analyze`` is, and the fingerprint of its weights
(:mod:`cl_diag.io.checkpoints`, a layer down, reads the bytes safely).

Four kinds of file are told apart by their contents, not their names: an **embeddings file**
(:mod:`cl_diag.io.embeddings`); a **cl-diag checkpoint**, checked by
:func:`check_checkpoint` against :data:`FORMAT` (the format's reading side lives here, below
the training that writes it); a **foreign checkpoint** of one of
:data:`~cl_diag.models.foreign.FOREIGN_LAYOUTS`; or one whose keys the user maps. Any other
file is refused with the key prefixes it holds and the options that would read it
(:func:`unknown_layout_message`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.io.checkpoints import TorchFileError, check_input_file, safe_torch_load, sniff
from cl_diag.io.paths import why_missing
from cl_diag.models.foreign import SUPPORTED_LAYOUTS, guess_arch, layout_of, recognise_layout
from cl_diag.models.keymap import (
    MAPPING_OPTIONS,
    KeyMapping,
    key_prefixes,
    mapping_example,
    raw_weights,
)
from cl_diag.models.timm_backbones import TIMM_FAMILY, match_timm_model, timm_input_side
from cl_diag.options import check_values, in_config
from cl_diag.trainconfig import RUN_CONFIG

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CheckpointFile",
    "Damaged",
    "check_checkpoint",
    "check_training_config",
    "damaged",
    "mapping_key",
    "read_checkpoint_file",
    "tensors_sha256",
    "unknown_layout_message",
    "weights_sha256",
    "whole_key",
]

FORMAT = "cl-diag/checkpoint"
FORMAT_VERSION = 1

_GIVE = "Give the path of a checkpoint or embeddings file."


@dataclass
class CheckpointFile:
    """What a file turned out to be: ``kind`` and the object read from it."""

    path: Path
    kind: str  # "embeddings" | "cl-diag" | a foreign layout (FOREIGN_LAYOUTS, or "mapped")
    payload: Any = field(repr=False)  # None for a .npz (read by load_embeddings)


class Damaged(Exception):
    """One key of a checkpoint that does not hold what cl-diag writes there (raised by the
    checks here and by :func:`cl_diag.training.checkpoint.check_training_state`; turned into
    the user's message by :func:`damaged`)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key} {problem}")
        self.key, self.problem = key, problem


def damaged(path: Path, error: Damaged) -> UserError:
    return UserError(
        f"{path} is a damaged cl-diag checkpoint: '{error.key}' {error.problem}. Give the "
        "last.pt that cl-diag train wrote (an intact copy), or train the run again."
    )


def whole_key(value: Any, key: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Damaged(key, f"must be a whole number, not {value!r}")
    if value < least:
        raise Damaged(key, f"must be at least {least}, not {value}")
    return value


def mapping_key(value: Any, key: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, (str, int)) for k in value):
        raise Damaged(key, f"must be a dict, not {type(value).__name__}")
    return value


def _state_dict(value: Any, key: str) -> None:
    for name, tensor in mapping_key(value, key).items():
        if not isinstance(tensor, torch.Tensor):
            raise Damaged(f"{key}.{name}", f"must be a tensor, not {type(tensor).__name__}")
        if tensor.layout != torch.strided or tensor.is_meta or tensor.is_quantized:
            raise Damaged(f"{key}.{name}", "must be a dense tensor")


def _views(value: Any) -> None:
    emb = mapping_key(value, "embeddings")
    shapes = []
    for name in ("z1", "z2"):
        t = emb.get(name)
        key = f"embeddings.{name}"
        if not isinstance(t, torch.Tensor):
            raise Damaged(key, f"must be a tensor, not {type(t).__name__}")
        if t.layout != torch.strided or t.is_meta or not t.is_floating_point() or t.dim() != 2:
            raise Damaged(key, "must be a dense 2-D float tensor (n x d)")
        shapes.append(tuple(t.shape))
    if shapes[0] != shapes[1]:
        raise Damaged("embeddings", f"holds views of different shapes {shapes[0]} and {shapes[1]}")


def check_training_config(
    config: Mapping[str, Any], where: str | os.PathLike, *, checkpoint: bool = False
) -> dict[str, Any]:
    """A training config checked with the declarations of the options that write it: every
    key ``cl-diag train`` knows against :data:`cl_diag.options.RUN_CONFIG` (type, bounds and
    the products that bound memory), the loss's hyper-parameters against the loss's own
    :class:`~cl_diag.losses.HParam` declarations, and the toy's classes against its
    instances. Returns the config with those values normalised (other keys kept as they
    are); a :class:`UserError` names the first value at fault.

    ``where`` names the config in the message: a checkpoint (``checkpoint``: its loss must be
    one ``cl-diag train`` offers, and the message calls the file damaged) or the
    ``training_config`` argument of ``cl_diag.analyze`` (a loss cl-diag does not know is kept:
    the theory panel says it predicts nothing for it)."""
    from cl_diag.losses import LOSSES, LossOptionError

    spelling = in_config(where, checkpoint=checkpoint)
    known = {key: value for key, value in config.items() if key in RUN_CONFIG}
    loss = known.get("loss")
    if not checkpoint and isinstance(loss, str) and loss not in LOSSES:
        del known["loss"]  # another tool's loss: named as it is, predicted for by nothing
    values = check_values(known, RUN_CONFIG, spelling=spelling)
    spec = LOSSES.get(values["loss"]) if isinstance(values.get("loss"), str) else None
    if spec is not None:
        hp = {k: values[k] for k in spec.hyperparameter_names if values.get(k) is not None}
        try:
            spec.resolve(**hp)
        except LossOptionError as exc:
            raise UserError(
                spelling.message(
                    f"{spelling.given(exc.option, hp.get(exc.option))} is not a value the "
                    f"{spec.name} loss takes ({exc})."
                )
            ) from None
    classes, instances = values.get("num_classes"), values.get("num_samples")
    toy = values.get("dataset") == "toy"
    if toy and classes is not None and instances is not None and classes > instances:
        raise UserError(
            spelling.message(
                f"{spelling.given('num_classes', classes)} exceeds the {instances} toy "
                "instances (config.num_samples)."
            )
        )
    return {**config, **values}


#: config keys that locate a checkpoint's data, and their types
_MODEL_CONFIG = {"data_root": str, "val_root": str}


def _model_config(config: dict, path: str | os.PathLike) -> None:
    for key, kind in _MODEL_CONFIG.items():
        value = config.get(key)
        if value is not None and not isinstance(value, kind):
            raise Damaged(f"config.{key}", f"must be a {kind.__name__}, not {value!r}")
    check_training_config(config, path, checkpoint=True)


def check_checkpoint(obj: Any, path: str | os.PathLike) -> dict[str, Any]:
    """``obj`` (read from ``path``) if it is a cl-diag checkpoint this version can read; else a
    UserError naming the first key at fault. Every key that describes the model and its
    measuring is checked here once for its type and size (``config`` through
    :func:`check_training_config`, the counts, the state dicts, ``split``, the toy's
    ``embeddings``)."""
    p = Path(path)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise UserError(
            f"{p} is a torch file but not a cl-diag checkpoint (no format marker {FORMAT!r}). "
            f"Give the last.pt that cl-diag train wrote."
        )
    version = obj.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UserError(
            f"{p} has checkpoint format version {version!r}; this cl-diag reads up to "
            f"{FORMAT_VERSION}. Upgrade cl-diag to read it."
        )
    missing = [k for k in ("config", "backbone", "projector", "epoch", "step") if k not in obj]
    if missing:
        raise UserError(f"{p} is a damaged cl-diag checkpoint: it lacks {', '.join(missing)}.")
    try:
        _model_config(mapping_key(obj["config"], "config"), p)
        if obj.get("n_train") is not None:
            whole_key(obj["n_train"], "n_train", least=2)
        whole_key(obj["epoch"], "epoch")
        whole_key(obj["step"], "step")
        if obj.get("complete") is not None and not isinstance(obj["complete"], bool):
            raise Damaged("complete", f"must be true or false, not {obj['complete']!r}")
        if obj.get("dataset") is not None and not isinstance(obj["dataset"], str):
            raise Damaged("dataset", f"must be a string, not {obj['dataset']!r}")
        _state_dict(obj["backbone"], "backbone")
        _state_dict(obj["projector"], "projector")
        split = obj.get("split")
        if split is not None:
            mapping_key(split, "split")
            for key in ("train_indices", "test_indices"):
                if key in split and not isinstance(split[key], torch.Tensor):
                    raise Damaged(f"split.{key}", "must be a tensor of indices")
        toy = (obj.get("dataset") or obj["config"].get("dataset")) == "toy"
        if toy or obj.get("embeddings") is not None:
            _views(obj.get("embeddings"))
        check_metrics_rows(obj.get("metrics", []))
    except Damaged as error:
        raise damaged(p, error) from None
    return obj


def check_metrics_rows(metrics: Any) -> None:
    """A checkpoint's ``metrics`` (metrics.csv's rows, which the analysis reads for the loss's
    plateau and resume continues): a list of rows of numbers; :class:`Damaged` otherwise."""
    if not isinstance(metrics, list):
        raise Damaged("metrics", f"must be a list of rows, not {type(metrics).__name__}")
    for i, row in enumerate(metrics):
        for name, value in mapping_key(row, f"metrics[{i}]").items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise Damaged(f"metrics[{i}].{name}", f"must be a number, not {value!r}")


def _is_cl_diag(payload: Any) -> bool:
    """A cl-diag checkpoint names its format (:data:`FORMAT`, or a future cl-diag one)."""
    if not isinstance(payload, dict):
        return False
    fmt = payload.get("format")
    return isinstance(fmt, str) and fmt.startswith("cl-diag")


def _describe_keys(payload: Any) -> str:
    if isinstance(payload, dict):
        keys = [str(k) for k in payload]
        more = f", ... ({len(keys)} in all)" if len(keys) > 12 else ""
        shown = ", ".join(repr(k) for k in keys[:12]) + more
        return f"top-level keys: {shown or 'none'}"
    return f"a {type(payload).__name__}, not a dict"


def unknown_layout_message(path: Path, payload: Any, mapping: KeyMapping | None = None) -> str:
    """Why ``payload`` was refused, where its tensors are, and what to type to read it."""
    mapping = mapping or KeyMapping()
    weights = mapping.rename(raw_weights(payload))
    text = f"{path} is not a checkpoint layout cl-diag knows ({_describe_keys(payload)})."
    if weights:
        prefixes = key_prefixes(weights)
        shown = ", ".join(
            f"'{prefix}' ({count} tensor{'s' if count != 1 else ''})"
            for prefix, count in prefixes[:10]
        )
        after = " after --rename" if mapping.renames else ""
        timm_name = None if mapping.selects else match_timm_model(weights)
        if timm_name is not None:  # a timm model's own state dict: --arch is all it needs
            side = timm_input_side(timm_name)
            example = f"--arch {TIMM_FAMILY}:{timm_name} --image-size {side}"
            text += (
                f" Its tensors{after} are under: {shown}; their names and shapes are those of "
                f"timm's {timm_name}. Read it as that model, at the side it was trained at "
                f"(timm's input size for it: {side} px); e.g. {example}."
            )
        else:
            example = mapping_example(prefixes, arch=guess_arch(weights, prefixes))
            text += (
                f" Its tensors{after} are under: {shown}. Map them onto an architecture with "
                f"--arch and {MAPPING_OPTIONS}; e.g. {example}."
            )
    return f"{text} {SUPPORTED_LAYOUTS}"


def read_checkpoint_file(
    path: str | Path,
    *,
    arch: str | None = None,
    mapping: KeyMapping | None = None,
    views: tuple[str, str] | None = None,
) -> CheckpointFile:
    """Open ``path`` safely and say which of the supported kinds it is (UserError otherwise).

    ``arch`` (``--arch``) lets any state dict be read as the ``state-dict`` layout; ``mapping``
    (``--rename`` before recognising; ``--backbone-prefix``: the ``mapped`` layout) applies to
    foreign checkpoints only. ``views`` (``--keys``): the names of an embeddings file's two
    arrays, which make any torch file holding a dict an embeddings file (the reader then
    names the arrays it lacks)."""
    path = Path(path)
    if not path.exists():  # analyze's wording (its tests and users know it)
        raise UserError(f"No such file: {path} {why_missing(path)}. {_GIVE}")
    path = check_input_file(path, fix=_GIVE)
    try:
        kind = sniff(path)
    except OSError as exc:
        raise TorchFileError(
            f"Cannot read {path}: {exc.strerror}. Check the path and its permissions.", "unreadable"
        ) from None
    if kind == "npz":
        return CheckpointFile(path, "embeddings", None)
    if kind != "torch":
        raise TorchFileError(
            f"{path} is neither a .npz nor a .pt/.pth/.ckpt torch file "
            f"(it is not a zip archive or a pickle). {SUPPORTED_LAYOUTS}",
            "not-torch",
        )
    payload = safe_torch_load(path, fix="Copy or save it again.")
    if views is not None or (isinstance(payload, dict) and "z1" in payload and "z2" in payload):
        return CheckpointFile(path, "embeddings", payload)
    if _is_cl_diag(payload):
        return CheckpointFile(path, "cl-diag", payload)
    layout = recognise_layout(payload, arch=arch, mapping=mapping)
    if layout is not None:
        return CheckpointFile(path, layout, payload)
    raise UserError(unknown_layout_message(path, payload, mapping))


def weights_sha256(file: CheckpointFile) -> str:
    """SHA-256 of the tensors that define the model (names, dtypes, shapes and bytes).

    A checkpoint also carries run records (timings, optimiser and RNG states) that differ
    between two runs with identical weights, so its file hash would make result.json differ
    too; this fingerprint does not.
    """
    payload = file.payload
    if file.kind == "cl-diag":
        keys = ("backbone", "projector", "embeddings")
        tree = {key: payload[key] for key in keys if key in payload}
    else:  # the layout's weights, not the optimiser's or the trainer's run records
        tree = layout_of(file.kind).fingerprinted(payload)
    return tensors_sha256(tree)


#: bytes of a tensor hashed at a time: a view is copied (to the CPU, contiguous) one chunk at
#: a time, so the fingerprint never holds a second copy of a large (or expanded) tensor
_CHUNK_BYTES = 16 << 20


def _row_major_chunks(tensor: torch.Tensor) -> Iterator[torch.Tensor]:
    """Consecutive pieces of ``tensor`` whose bytes, in order, are the tensor's row-major
    bytes, each at most :data:`_CHUNK_BYTES` (or one row of the innermost dimension)."""
    if tensor.dim() == 0 or tensor.numel() * tensor.element_size() <= _CHUNK_BYTES:
        yield tensor
        return
    if tensor.is_contiguous():  # the same bytes, as one flat vector cut in pieces
        flat = tensor.reshape(-1)
        step = max(1, _CHUNK_BYTES // tensor.element_size())
        for start in range(0, flat.numel(), step):
            yield flat[start : start + step]
        return
    row = tensor[0].numel() * tensor.element_size()
    if row <= _CHUNK_BYTES:
        step = max(1, _CHUNK_BYTES // max(row, 1))
        for start in range(0, tensor.shape[0], step):
            yield tensor[start : start + step]
        return
    for index in range(tensor.shape[0]):
        yield from _row_major_chunks(tensor[index])


def tensors_sha256(tree: Any) -> str:
    """SHA-256 of every tensor in a tree of dicts, lists and tuples: names (paths in the
    tree), dtypes, shapes and bytes. The fingerprint of :func:`weights_sha256`, and of the
    modules passed to ``cl_diag.analyze`` (their state dicts)."""
    digest = hashlib.sha256()

    def visit(prefix: str, node: Any) -> None:
        if isinstance(node, torch.Tensor):
            tensor = node.detach()
            digest.update(f"{prefix}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
            for chunk in _row_major_chunks(tensor):
                flat = chunk.cpu().contiguous().reshape(-1).view(torch.uint8)
                digest.update(flat.numpy().tobytes())  # one chunk: at most _CHUNK_BYTES
        elif isinstance(node, dict):
            for key in sorted(node, key=str):
                visit(f"{prefix}/{key}", node[key])
        elif isinstance(node, (list, tuple)):
            for index, item in enumerate(node):
                visit(f"{prefix}[{index}]", item)

    visit("", tree)
    return digest.hexdigest()
