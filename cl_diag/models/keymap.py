"""The tensors of a foreign file by key, and the user's mapping of keys cl-diag does not know::

    cl-diag analyze ckpt.pth --arch resnet18 --backbone-prefix 'model.encoder.' \\
        --projector-prefix 'model.head.' --rename '[.]shortcut[.]=.downsample.'

:func:`raw_weights` is what those options see (the state dict under ``state_dict`` or
``model``, the dict itself, else every tensor of the nested dicts under its dotted path);
:class:`KeyMapping` applies ``--rename`` in order, then the prefixes; the message for an
unknown layout lists :func:`key_prefixes` of the same keys, so it shows what the user types.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cl_diag.errors import UserError

__all__ = [
    "MAPPING_OPTIONS",
    "KeyMapping",
    "example_backbone_prefix",
    "is_tensor_dict",
    "key_prefixes",
    "mapping_example",
    "raw_weights",
    "state_dict_of",
]

#: The options, as the unknown-layout message and the README name them.
MAPPING_OPTIONS = (
    "--backbone-prefix P (the keys under P are the backbone, P removed), --projector-prefix Q "
    "(the keys under Q are the projector; the backbone then leaves them out), --rename "
    "'REGEX=REPLACEMENT' (repeatable; applied in order to every key before the prefixes and "
    "the strict key check, split at the last '=')"
)


def is_tensor_dict(value: Any) -> bool:
    """A non-empty dict of string keys to tensors (a state dict)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    )


def state_dict_of(payload: Any) -> dict[str, torch.Tensor] | None:
    """The state dict of a payload: the payload itself, or its ``state_dict`` or ``model``."""
    if is_tensor_dict(payload):
        return payload
    if isinstance(payload, dict):
        for key in ("state_dict", "model"):
            if is_tensor_dict(payload.get(key)):
                return payload[key]
    return None


def _flatten(node: Any, prefix: str, out: dict[str, torch.Tensor]) -> None:
    # Only dicts are walked: a list (an optimizer's param_groups) holds no weights.
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(value, dict):
            _flatten(value, f"{name}.", out)


def raw_weights(payload: Any) -> dict[str, torch.Tensor]:
    """The tensors of a payload by key, as the mapping options see them ({} if none).

    The state dict when there is one (:func:`state_dict_of`), else the tensors of every
    nested dict under its dotted path (DINO's ``{"teacher": {...}, "student": {...}}``).
    """
    weights = state_dict_of(payload)
    if weights is not None:
        return dict(weights)
    out: dict[str, torch.Tensor] = {}
    if isinstance(payload, dict):
        _flatten(payload, "", out)
    return out


# --------------------------------------------------------------------------- prefixes


def _prefix(key: str, depth: int) -> str:
    parts = key.split(".")
    return ".".join(parts[:depth]) + "." if len(parts) > depth else key


def key_prefixes(keys: Iterable[str], *, most: int = 10) -> list[tuple[str, int]]:
    """The key prefixes worth showing a user, with how many tensors each holds.

    The deepest grouping (down to 4 levels) that splits the keys into 2 to ``most`` groups
    without cutting into an ``nn.Sequential``'s numbered entries; the top level otherwise.
    Biggest groups first.
    """
    keys = list(keys)
    chosen = Counter(_prefix(k, 1) for k in keys)
    for depth in (2, 3, 4):
        groups = Counter(_prefix(k, depth) for k in keys)
        numbered = any(g.endswith(".") and g[:-1].rsplit(".", 1)[-1].isdigit() for g in groups)
        if numbered or len(groups) > most:
            break
        if len(groups) >= 2:
            chosen = groups
    return sorted(chosen.items(), key=lambda item: (-item[1], item[0]))


def example_backbone_prefix(prefixes: list[tuple[str, int]]) -> str:
    """The group :func:`mapping_example` offers as the backbone: the biggest one."""
    groups = [p for p, _ in prefixes if p.endswith(".")]
    return groups[0] if groups else "encoder."


def mapping_example(prefixes: list[tuple[str, int]], arch: str | None = None) -> str:
    """An example command line for ``prefixes``: the biggest group as the backbone
    (:func:`example_backbone_prefix`), a group named like a head (head, proj, fc, mlp) as the
    projector, and ``--arch`` the architecture its weights look like (``ARCH``: not known).
    What it offers runs as it is when ``arch`` is known (tests/test_suggestions.py)."""
    groups = [p for p, _ in prefixes if p.endswith(".")]
    backbone = example_backbone_prefix(prefixes)
    heads = [
        p
        for p in groups
        if p != backbone and re.search(r"head|proj|fc|mlp", p.rsplit(".", 2)[-2], re.I)
    ]
    projector = f" --projector-prefix '{heads[0]}'" if heads else ""
    return f"--arch {arch or 'ARCH'} --backbone-prefix '{backbone}'{projector}"


# --------------------------------------------------------------------------- the mapping


@dataclass(frozen=True)
class KeyMapping:
    """``--backbone-prefix``, ``--projector-prefix`` and ``--rename`` as given."""

    backbone_prefix: str | None = None
    projector_prefix: str | None = None
    renames: tuple[tuple[str, str], ...] = ()  # (pattern, replacement), applied in order

    @classmethod
    def parse(
        cls,
        *,
        backbone_prefix: str | None = None,
        projector_prefix: str | None = None,
        renames: Iterable[str] = (),
    ) -> KeyMapping:
        """Check the options; UserError naming the fix."""
        pairs = []
        for text in renames:
            # The last '=': a pattern may hold one ('(?=...)'), a key name never does.
            pattern, equals, replacement = str(text).rpartition("=")
            if not equals or not pattern:
                raise UserError(
                    f"--rename {text!r} is not REGEX=REPLACEMENT; e.g. --rename '^net\\.=' "
                    "removes the prefix 'net.' from every key, --rename '^0\\.=conv1.' renames "
                    "one module."
                )
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UserError(
                    f"--rename {text!r}: {pattern!r} is not a regular expression ({exc})."
                ) from None
            pairs.append((pattern, replacement))
        if projector_prefix is not None and backbone_prefix is None:
            raise UserError(
                "--projector-prefix needs --backbone-prefix too (--backbone-prefix '' takes "
                "every key outside the projector as the backbone)."
            )
        if projector_prefix is not None and projector_prefix == backbone_prefix:
            raise UserError(
                f"--backbone-prefix and --projector-prefix are both {backbone_prefix!r}; they "
                "must select different keys."
            )
        return cls(backbone_prefix, projector_prefix, tuple(pairs))

    @property
    def selects(self) -> bool:
        """Whether the user names the backbone's keys (the layout is then ``mapped``)."""
        return self.backbone_prefix is not None

    def __bool__(self) -> bool:
        return self.selects or bool(self.renames)

    def rename(self, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every key through the ``--rename`` rules, in order; UserError when two keys end up
        with one name."""
        if not self.renames:
            return dict(weights)
        out: dict[str, torch.Tensor] = {}
        origin: dict[str, str] = {}
        for key, value in weights.items():
            new = key
            for pattern, replacement in self.renames:
                try:
                    new = re.sub(pattern, replacement, new)
                except re.error as exc:  # a bad group reference in the replacement
                    raise UserError(
                        f"--rename '{pattern}={replacement}': the replacement is invalid ({exc})."
                    ) from None
            if new in out:
                raise UserError(
                    f"--rename maps both {origin[new]!r} and {key!r} to {new!r}; make the "
                    "patterns more specific (anchor them with ^ and escape dots)."
                )
            out[new], origin[new] = value, key
        return out

    def select(
        self, weights: Mapping[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[str]]:
        """``(backbone, projector, ignored)``: the keys under the two prefixes, prefixes
        removed, and the prefixes (one level below what was selected) of the rest."""
        back = self.backbone_prefix or ""
        proj = self.projector_prefix
        backbone: dict[str, torch.Tensor] = {}
        projector: dict[str, torch.Tensor] = {}
        rest: list[str] = []
        for key, value in weights.items():
            if proj is not None and key.startswith(proj):
                projector[key[len(proj) :]] = value
            elif key.startswith(back):
                backbone[key[len(back) :]] = value
            else:
                rest.append(key)
        ignored = sorted({p.rstrip(".") for p, _ in key_prefixes(rest)}) if rest else []
        return backbone, projector, ignored

    def record(self) -> dict[str, Any]:
        """What was given, for result.json's ``source``."""
        out: dict[str, Any] = {}
        if self.backbone_prefix is not None:
            out["backbone_prefix"] = self.backbone_prefix
        if self.projector_prefix is not None:
            out["projector_prefix"] = self.projector_prefix
        if self.renames:
            out["renames"] = [f"{p}={r}" for p, r in self.renames]
        return out
