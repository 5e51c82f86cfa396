"""Reading the checkpoint a user brings to ``cl-diag analyze``: what it is, and its weights.

Four kinds of file are told apart by their contents, not their names:

* an **embeddings file** (``.npz``, or a torch file holding ``z1`` and ``z2``): see
  :mod:`cl_diag.io.embeddings`;
* a **cl-diag checkpoint** (written by ``cl-diag train``; rebuilt by the trainer's
  ``load_checkpoint``);
* a **solo-learn checkpoint**: a PyTorch Lightning ``.ckpt`` whose ``state_dict`` holds
  ``backbone.*`` (older releases: ``encoder.*``), ``projector.*`` and ``classifier.*``;
  ``args.json`` beside the file, when present, names the method, backbone and dataset;
* a **plain backbone state dict**: torchvision ResNet keys (``conv1.weight``,
  ``layer1.0.conv1.weight``, ...), optionally under a ``module.`` or ``backbone.`` prefix
  and optionally wrapped as ``{"state_dict": ...}`` or ``{"model": ...}``.

Every torch file is opened with ``torch.load(..., weights_only=True)``: a file is data,
never code. A file that carries pickled objects is refused before anything in it runs.
Loading is strict: a backbone key that is missing, unexpected or of the wrong shape is an
error that lists them, so a wrong ``--arch`` cannot pass silently.

The CIFAR stem's padding is not stored in the weights (a 3x3 kernel has the same shape
with padding 1 or 2): solo-learn upstream builds ``Conv2d(3, 64, 3, stride 1, padding 2)``,
the paper's fork (leechungpa/embedding-similarity-cl) and the usual CIFAR ResNet use
padding 1. See :func:`resolve_cifar_stem_padding` for the default.
"""

from __future__ import annotations

import hashlib

import json
import math
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_diag.errors import UserError

__all__ = [
    "ARCHS",
    "SUPPORTED_LAYOUTS",
    "CheckpointFile",
    "ForeignEncoder",
    "read_checkpoint_file",
    "safe_torch_load",
    "load_foreign_encoder",
    "build_resnet",
    "build_projector",
    "infer_resnet_arch",
    "resolve_cifar_stem_padding",
    "read_solo_args",
]

#: Backbones a foreign checkpoint can be rebuilt as: torchvision ResNets, the ``-cifar``
#: ones with the 3x3 stride-1 stem and no max-pool (solo-learn's rule for CIFAR).
ARCHS = ("resnet18-cifar", "resnet18", "resnet34-cifar", "resnet34", "resnet50-cifar", "resnet50")

_CIFAR_DATASETS = ("cifar10", "cifar100")

SUPPORTED_LAYOUTS = (
    "Supported layouts: (1) an embeddings file (.npz, or a torch file with 'z1' and 'z2'); "
    "(2) a cl-diag checkpoint written by 'cl-diag train'; "
    "(3) a solo-learn Lightning .ckpt with 'state_dict' keys 'backbone.*' (older: 'encoder.*'), "
    "'projector.*', 'classifier.*'; "
    "(4) a plain torchvision ResNet state dict (keys 'conv1.weight', 'layer1.0.conv1.weight', ...; "
    "optional 'module.' or 'backbone.' prefix; optionally under 'state_dict' or 'model'), "
    "analysed with --arch."
)

_PICKLE_HELP = (
    "cl-diag opens checkpoints with torch.load(weights_only=True): it only loads plain tensors and "
    "containers, never pickled objects, so no code from a file ever runs. "
    "If you trust the file, re-save only its weights, e.g. "
    "python -c \"import torch; c = torch.load('IN', weights_only=False); "
    "torch.save({'state_dict': c['state_dict']}, 'OUT.ckpt')\", and analyse OUT.ckpt."
)


# --------------------------------------------------------------------------- reading files


@dataclass
class CheckpointFile:
    """What a file turned out to be: ``kind`` and the object read from it."""

    path: Path
    kind: str  # "embeddings" | "cl-diag" | "solo-learn" | "state-dict"
    payload: Any = field(repr=False)  # None for a .npz (read by load_embeddings)


def weights_sha256(file: "CheckpointFile") -> str:
    """SHA-256 of the tensors that define the model (names, dtypes, shapes and bytes).

    A checkpoint also carries run records (timings, optimiser and RNG states) that differ
    between two runs with identical weights, so its file hash would make result.json differ
    too; this fingerprint does not.
    """
    payload = file.payload
    if file.kind == "cl-diag":
        tree = {key: payload[key] for key in ("backbone", "projector", "embeddings") if key in payload}
    elif file.kind == "solo-learn":
        tree = payload.get("state_dict", payload)
    else:
        tree = payload
    digest = hashlib.sha256()

    def visit(prefix: str, node: Any) -> None:
        if isinstance(node, torch.Tensor):
            tensor = node.detach().cpu().contiguous()
            digest.update(f"{prefix}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(node, dict):
            for key in sorted(node, key=str):
                visit(f"{prefix}/{key}", node[key])
        elif isinstance(node, (list, tuple)):
            for index, item in enumerate(node):
                visit(f"{prefix}[{index}]", item)

    visit("", tree)
    return digest.hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def safe_torch_load(path: Path) -> Any:
    """``torch.load(path, weights_only=True)`` on CPU, every failure a UserError."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - each failure becomes a message
        text = str(exc)
        found = re.search(r"Unsupported (?:global|class): (?:GLOBAL )?([\w.]+)", text)
        if found:
            raise UserError(
                f"Refused to load {path}: it carries a pickled Python object ({found.group(1)}), which could run "
                f"arbitrary code when unpickled. {_PICKLE_HELP}"
            ) from None
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
        raise UserError(
            f"Could not read {path} with torch.load(weights_only=True) "
            f"({type(exc).__name__}: {detail.group(1).strip() if detail else _first_line(exc)}). "
            "The file is truncated, damaged or not a torch checkpoint; copy or save it again."
        ) from None


def _is_npz(path: Path) -> bool:
    if path.suffix.lower() == ".npz":
        return True
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError):
            return False
        return bool(names) and all(name.endswith(".npy") for name in names)
    return False


def _is_tensor_dict(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items()
    )


def _is_cl_diag(payload: Any) -> bool:
    """A cl-diag checkpoint names its format (see cl_diag.training.checkpoint)."""
    if not isinstance(payload, dict):
        return False
    fmt = payload.get("format")
    return isinstance(fmt, str) and fmt.startswith("cl-diag")


def _weights_of(payload: Any) -> dict[str, torch.Tensor] | None:
    """The state dict inside a foreign payload, or None."""
    if _is_tensor_dict(payload):
        return payload
    if isinstance(payload, dict):
        for key in ("state_dict", "model"):
            if _is_tensor_dict(payload.get(key)):
                return payload[key]
    return None


def _strip(keys_to_values: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in keys_to_values.items() if k.startswith(prefix)}


def _describe_keys(payload: Any) -> str:
    if isinstance(payload, dict):
        keys = [str(k) for k in payload]
        shown = ", ".join(repr(k) for k in keys[:12]) + (f", ... ({len(keys)} in all)" if len(keys) > 12 else "")
        return f"top-level keys: {shown or 'none'}"
    return f"a {type(payload).__name__}, not a dict"


def read_checkpoint_file(path: str | Path) -> CheckpointFile:
    """Open ``path`` safely and say which of the supported kinds it is (UserError otherwise)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"No such file: {path}. Give the path of a checkpoint or embeddings file.")
    if not path.is_file():
        raise UserError(f"{path} is not a file. Give the path of a checkpoint or embeddings file.")
    if _is_npz(path):
        return CheckpointFile(path, "embeddings", None)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise UserError(f"Cannot read {path}: {exc.strerror}. Check the path and its permissions.") from None
    # torch.save writes a zip archive (PK..); torch < 1.6 and Lightning's legacy files a pickle (0x80).
    if not (magic.startswith(b"PK") or magic[:1] == b"\x80"):
        raise UserError(
            f"{path} is neither a .npz nor a .pt/.pth/.ckpt torch file (it is not a zip archive or a pickle). "
            f"{SUPPORTED_LAYOUTS}"
        )
    payload = safe_torch_load(path)
    if isinstance(payload, dict) and "z1" in payload and "z2" in payload:
        return CheckpointFile(path, "embeddings", payload)
    if _is_cl_diag(payload):
        return CheckpointFile(path, "cl-diag", payload)
    weights = _weights_of(payload)
    if weights is not None:
        keys = _unwrap_module(weights)
        if any(k.startswith(("backbone.", "encoder.")) for k in keys) and (
            isinstance(payload, dict) and "state_dict" in payload
            or any(k.startswith(("projector.", "classifier.")) for k in keys)
        ):
            return CheckpointFile(path, "solo-learn", payload)
        plain = _strip(keys, "backbone.") or keys
        if "conv1.weight" in plain and any(k.startswith("layer1.0.") for k in plain):
            return CheckpointFile(path, "state-dict", payload)
    raise UserError(
        f"{path} is not a checkpoint layout cl-diag knows ({_describe_keys(payload)}). {SUPPORTED_LAYOUTS}"
    )


def _unwrap_module(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop DistributedDataParallel's ``module.`` prefix when every key has it."""
    if weights and all(k.startswith("module.") for k in weights):
        return _strip(weights, "module.")
    return dict(weights)


# --------------------------------------------------------------------------- architectures


def _parse_arch(arch: str) -> tuple[str, bool]:
    if arch not in ARCHS:
        raise UserError(f"--arch {arch!r} is not supported for foreign checkpoints; choose one of {', '.join(ARCHS)}.")
    return arch.removesuffix("-cifar"), arch.endswith("-cifar")


def build_resnet(arch: str, *, cifar_stem_padding: int = 1, seed: int | None = None) -> nn.Module:
    """A torchvision ResNet feature extractor: ``fc`` is the identity, so the output is the
    pooled feature (512-d for resnet18/34, 2048-d for resnet50). The ``-cifar`` variants use
    solo-learn's CIFAR stem: ``Conv2d(3, 64, 3, stride=1, padding=cifar_stem_padding)`` and
    no max-pool. ``seed`` fixes the random initialisation without touching the global RNG."""
    import torchvision

    base, cifar = _parse_arch(arch)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        net = getattr(torchvision.models, base)(weights=None)
        if cifar:
            net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=cifar_stem_padding, bias=False)
            net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    return net


def resnet_feature_dim(arch: str) -> int:
    return 2048 if _parse_arch(arch)[0] == "resnet50" else 512


def infer_resnet_arch(backbone: dict[str, torch.Tensor]) -> str | None:
    """The member of :data:`ARCHS` whose keys and shapes these weights have, or None."""
    conv1 = backbone.get("conv1.weight")
    if conv1 is None or conv1.dim() != 4:
        return None
    blocks = []
    for layer in (1, 2, 3, 4):
        indices = {int(m.group(1)) for k in backbone if (m := re.match(rf"layer{layer}\.(\d+)\.", k))}
        blocks.append(len(indices))
    bottleneck = any(k.endswith(".conv3.weight") for k in backbone)
    base = {
        ((2, 2, 2, 2), False): "resnet18",
        ((3, 4, 6, 3), False): "resnet34",
        ((3, 4, 6, 3), True): "resnet50",
    }.get((tuple(blocks), bottleneck))
    if base is None:
        return None
    return base + ("-cifar" if conv1.shape[-1] == 3 else "")


def _load_strict(module: nn.Module, state: dict[str, torch.Tensor], what: str, hint: str) -> None:
    """load_state_dict, after checking keys and shapes so that every mismatch is listed."""
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}"
        for k in expected
        if k in state and tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    if missing or unexpected or wrong:

        def listing(name: str, items: list[str]) -> str:
            if not items:
                return ""
            more = f", ... ({len(items)} in all)" if len(items) > 8 else ""
            return f" {name}: {', '.join(items[:8])}{more}."

        raise UserError(
            f"The {what} weights do not fit the model they were loaded into."
            + listing("Missing keys", missing)
            + listing("Unexpected keys", unexpected)
            + listing("Wrong shapes (file vs model)", wrong)
            + f" {hint}"
        )
    module.load_state_dict(state, strict=True)


# --------------------------------------------------------------------------- projector


def build_projector(state: dict[str, torch.Tensor]) -> tuple[nn.Sequential, str]:
    """Rebuild an ``nn.Sequential`` projector from its state-dict keys and shapes.

    A position with a 2-D ``weight`` is a Linear, one with ``running_mean`` a BatchNorm1d,
    and a position with no parameters (a gap in the indices) is a ReLU, as in every
    solo-learn projector: upstream SimCLR's Linear-ReLU-Linear (indices 0, 2) and the
    paper's fork's Linear-BN-ReLU-Linear (0, 1, 3) both come out right. Returns the module
    (weights loaded, strictly) and a description such as ``Linear(512,2048)-BN-ReLU-Linear(2048,128)``.
    """
    by_index: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        head, _, rest = key.partition(".")
        if not head.isdigit() or not rest:
            raise UserError(
                f"The projector key 'projector.{key}' is not an nn.Sequential entry; cl-diag rebuilds "
                "projectors made of Linear, BatchNorm1d and ReLU layers only."
            )
        by_index.setdefault(int(head), {})[rest] = value
    if not by_index:
        raise UserError("The checkpoint's projector has no weights.")
    layers: list[nn.Module] = []
    parts: list[str] = []
    for index in range(max(by_index) + 1):
        params = by_index.get(index)
        if params is None:
            layers.append(nn.ReLU())
            parts.append("ReLU")
        elif "running_mean" in params:
            width = params["running_mean"].shape[0]
            layers.append(nn.BatchNorm1d(width, affine="weight" in params))
            parts.append("BN")
        elif "weight" in params and params["weight"].dim() == 2:
            out_dim, in_dim = params["weight"].shape
            layers.append(nn.Linear(in_dim, out_dim, bias="bias" in params))
            parts.append(f"Linear({in_dim},{out_dim})")
        else:
            raise UserError(
                f"The projector layer {index} has parameters {sorted(params)} that are neither a Linear "
                "nor a BatchNorm1d; cl-diag cannot rebuild this projector."
            )
    if not isinstance(layers[-1], nn.Linear):
        raise UserError("The checkpoint's projector does not end with a Linear layer; cannot rebuild it.")
    projector = nn.Sequential(*layers)
    _load_strict(projector, state, "projector", "The projector layout could not be inferred from its keys.")
    return projector, "-".join(parts)


def _projector_in_dim(projector: nn.Sequential) -> int:
    return next(m for m in projector if isinstance(m, nn.Linear)).in_features


# --------------------------------------------------------------------------- solo-learn args


def _get(mapping: dict, dotted: str) -> Any:
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _first(mapping: dict, *dotted: str) -> Any:
    for key in dotted:
        value = _get(mapping, key)
        if value is not None and value != "<not serializable>":
            return value
    return None


def read_solo_args(ckpt_path: Path) -> tuple[dict | None, Path | None]:
    """The ``args.json`` solo-learn writes beside its checkpoints, or (None, None)."""
    args_path = ckpt_path.parent / "args.json"
    if not args_path.is_file():
        return None, None
    try:
        args = json.loads(args_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{args_path} (solo-learn's run arguments, beside the checkpoint) could not be read: {exc}. "
            "Fix or remove it and give --arch and --dataset instead."
        ) from None
    if not isinstance(args, dict):
        raise UserError(f"{args_path} does not hold a JSON object; fix or remove it.")
    return args, args_path


def solo_training_config(args: dict) -> dict:
    """solo-learn's run arguments (new nested Hydra layout or old flat argparse layout) in
    ``cl-diag train``'s vocabulary, for ``theory`` and for ``compare``'s run labels."""
    backbone = _first(args, "backbone.name", "backbone", "encoder")
    dataset = _first(args, "data.dataset", "dataset")
    per_device = _first(args, "optimizer.batch_size", "batch_size")
    devices = _first(args, "devices", "gpus")
    n_devices = len(devices) if isinstance(devices, list) and devices else 1
    nodes = _first(args, "num_nodes") or 1
    vrn_enabled = _first(args, "add_vrn_loss_term.enabled")
    vrn_weight = _first(args, "add_vrn_loss_term.weight")
    config = {
        "loss": _first(args, "method"),
        "batch_size": (int(per_device) * n_devices * int(nodes)) if isinstance(per_device, int) else None,
        "batch_size_per_device": per_device,
        "temperature": _first(args, "method_kwargs.temperature", "temperature"),
        "bias": _first(args, "method_kwargs.bias", "bias"),
        "vrn": float(vrn_weight) if vrn_enabled and vrn_weight is not None else 0.0,
        "vrn_k": _first(args, "add_vrn_loss_term.k") if vrn_enabled else None,
        "vrn_delta": _first(args, "add_vrn_loss_term.delta") if vrn_enabled else None,
        "vrn_p": _first(args, "add_vrn_loss_term.p") if vrn_enabled else None,
        "epochs": _first(args, "max_epochs"),
        "lr": _first(args, "optimizer.lr", "lr"),
        "weight_decay": _first(args, "optimizer.weight_decay", "weight_decay"),
        "optimizer": _first(args, "optimizer.name", "optimizer"),
        "seed": _first(args, "seed"),
        "dataset": dataset,
        "arch": (
            f"{backbone}-cifar" if isinstance(backbone, str) and dataset in _CIFAR_DATASETS else backbone
        ),
        "proj_hidden_dim": _first(args, "method_kwargs.proj_hidden_dim", "proj_hidden_dim"),
        "proj_output_dim": _first(args, "method_kwargs.proj_output_dim", "proj_output_dim"),
        "precision": _first(args, "precision"),
        "name": _first(args, "name"),
    }
    return {k: v for k, v in config.items() if v is not None}


# --------------------------------------------------------------------------- the encoder


@dataclass
class ForeignEncoder:
    """A solo-learn checkpoint or plain state dict, rebuilt as torch modules (eval mode)."""

    kind: str  # "solo-learn" | "state-dict"
    arch: str
    backbone: nn.Module
    projector: nn.Module | None
    projector_layout: str | None
    feature_dim: int
    dataset: str | None
    num_classes: int | None  # from the online classifier's weights, when present
    training_config: dict
    args_path: str | None
    cifar_stem_padding: dict | None  # {"value": p, "from": why}; None without a CIFAR stem
    ignored: list[str]  # top-level modules of the checkpoint not used (classifier, momentum_*, ...)
    provenance: dict  # where arch and dataset came from

    def random_init(self, seed: int) -> tuple[nn.Module, nn.Module | None]:
        """The same architecture at random initialisation (seeded), for the probes' baseline."""
        padding = self.cifar_stem_padding["value"] if self.cifar_stem_padding else 1
        backbone = build_resnet(self.arch, cifar_stem_padding=padding, seed=seed).eval()
        projector = None
        if self.projector is not None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed + 1)
                projector = _fresh_like(self.projector).eval()
        return backbone, projector


def _fresh_like(projector: nn.Module) -> nn.Sequential:
    layers: list[nn.Module] = []
    for layer in projector:
        if isinstance(layer, nn.Linear):
            layers.append(nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None))
        elif isinstance(layer, nn.BatchNorm1d):
            layers.append(nn.BatchNorm1d(layer.num_features, affine=layer.affine))
        else:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


#: Which CIFAR-stem padding a rebuilt backbone uses when --cifar-stem-padding is not given.
PADDING_DEFAULT_TEXT = (
    "auto: 2 for a solo-learn checkpoint from upstream solo-learn, 1 for one from the paper's fork "
    "(recognised by a BatchNorm in the projector or 'add_vrn_loss_term' in args.json) and for "
    "plain state dicts"
)


def resolve_cifar_stem_padding(given: int | None, *, kind: str, fork_signs: list[str]) -> dict:
    """The CIFAR stem's padding and the reason for it (it is not in the weights)."""
    if given is not None:
        if given not in (0, 1, 2, 3):
            raise UserError(f"--cifar-stem-padding must be 0, 1, 2 or 3 (got {given}); solo-learn uses 2, the paper's fork 1.")
        return {"value": int(given), "from": "--cifar-stem-padding"}
    if kind == "solo-learn" and not fork_signs:
        return {"value": 2, "from": "default for upstream solo-learn checkpoints (Conv2d(3, 64, 3, padding=2))"}
    if kind == "solo-learn":
        return {"value": 1, "from": "default for the paper's fork, recognised by " + " and ".join(fork_signs)}
    return {"value": 1, "from": "default for plain state dicts (the usual CIFAR ResNet stem)"}


def load_foreign_encoder(
    file: CheckpointFile,
    *,
    arch: str | None = None,
    dataset: str | None = None,
    cifar_stem_padding: int | None = None,
) -> ForeignEncoder:
    """Rebuild a solo-learn checkpoint or a plain state dict as backbone (+ projector).

    ``arch`` and ``dataset`` from the command line win over ``args.json``; one of the two
    must name the architecture. Raises UserError for every mismatch.
    """
    if file.kind not in ("solo-learn", "state-dict"):
        raise ValueError(f"not a foreign checkpoint: {file.kind}")
    weights = _unwrap_module(_weights_of(file.payload) or {})
    args, args_path = read_solo_args(file.path) if file.kind == "solo-learn" else (None, None)
    config = solo_training_config(args) if args else {}

    if file.kind == "solo-learn":
        prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else "encoder."
        backbone_state = _strip(weights, prefix)
        projector_state = _strip(weights, "projector.")
        classifier = weights.get("classifier.weight")
        tops = sorted({k.split(".", 1)[0] for k in weights} - {prefix.rstrip("."), "projector"})
    else:
        prefix = "backbone." if any(k.startswith("backbone.") for k in weights) else ""
        backbone_state = _strip(weights, prefix) if prefix else dict(weights)
        projector_state, classifier = {}, None
        tops = sorted({k.split(".", 1)[0] for k in weights if prefix and not k.startswith(prefix)})
    # torchvision's classification head is not part of the feature extractor.
    dropped_fc = sorted(k for k in backbone_state if k.startswith("fc."))
    for key in dropped_fc:
        backbone_state.pop(key)
    ignored = tops + ([f"{prefix}fc"] if dropped_fc else [])

    guess = infer_resnet_arch(backbone_state)
    provenance: dict[str, str] = {}
    if arch is not None:
        provenance["arch"] = "--arch"
    elif config.get("arch"):
        arch = str(config["arch"])
        provenance["arch"] = f"{args_path.name} beside the checkpoint" if args_path else "args.json"
    else:
        looks = f" These weights look like {guess}." if guess else ""
        raise UserError(
            f"{file.path} does not record its architecture (no args.json beside it): give --arch, "
            f"one of {', '.join(ARCHS)}.{looks}"
        )
    if arch not in ARCHS:
        looks = f" These weights look like {guess}." if guess else ""
        raise UserError(f"--arch {arch!r} is not supported for foreign checkpoints; choose one of {', '.join(ARCHS)}.{looks}")

    if dataset is not None:
        provenance["dataset"] = "--dataset"
    elif config.get("dataset"):
        dataset = str(config["dataset"])
        provenance["dataset"] = "args.json"

    fork_signs = []
    projector = layout = None
    if projector_state:
        projector, layout = build_projector(projector_state)
        if any(isinstance(m, nn.BatchNorm1d) for m in projector):
            fork_signs.append("a BatchNorm in the projector")
    if args and _get(args, "add_vrn_loss_term") is not None:
        fork_signs.append("'add_vrn_loss_term' in args.json")
    cifar = arch.endswith("-cifar")
    padding = resolve_cifar_stem_padding(cifar_stem_padding, kind=file.kind, fork_signs=fork_signs) if cifar else None

    backbone = build_resnet(arch, cifar_stem_padding=padding["value"] if padding else 1, seed=0)
    hint = (
        f"These weights look like {guess}; pass --arch {guess}."
        if guess and guess != arch
        else f"Check --arch (given or recorded: {arch}); supported: {', '.join(ARCHS)}."
    )
    _load_strict(backbone, backbone_state, f"backbone ({arch})", hint)
    feature_dim = resnet_feature_dim(arch)
    if projector is not None and _projector_in_dim(projector) != feature_dim:
        raise UserError(
            f"The projector takes {_projector_in_dim(projector)}-d inputs but the {arch} backbone gives "
            f"{feature_dim}-d features; the checkpoint is inconsistent."
        )
    num_classes = int(classifier.shape[0]) if isinstance(classifier, torch.Tensor) and classifier.dim() == 2 else None
    return ForeignEncoder(
        kind=file.kind,
        arch=arch,
        backbone=backbone.eval(),
        projector=projector.eval() if projector is not None else None,
        projector_layout=layout,
        feature_dim=feature_dim,
        dataset=dataset,
        num_classes=num_classes,
        training_config=config,
        args_path=str(args_path) if args_path else None,
        cifar_stem_padding=padding,
        ignored=ignored,
        provenance=provenance,
    )


def lightning_metadata(payload: Any) -> dict:
    """Epoch, step and Lightning version of a .ckpt, when recorded (plain numbers only)."""
    if not isinstance(payload, dict):
        return {}
    out = {}
    for key in ("epoch", "global_step", "pytorch-lightning_version"):
        value = payload.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            out[key.replace("pytorch-lightning_version", "lightning_version")] = value
        elif isinstance(value, float) and math.isfinite(value):
            out[key] = value
    return out
