"""Reading a user's torch file safely: what kind of file it is, and its one safe ``torch.load``.

One concept at two layers: this module reads the bytes (sniffing, the safe load);
:mod:`cl_diag.models.checkpoints`, a layer up, says what the loaded file is (embeddings, a
cl-diag checkpoint, a foreign layout) and reads the cl-diag checkpoint format.

* :func:`sniff` tells an ``.npz`` archive, a torch file and anything else apart by content
  (``torch.save`` writes a zip archive, torch < 1.6 and legacy Lightning files a raw pickle).
* :func:`safe_torch_load` is the only ``torch.load`` of the package. It always passes
  ``weights_only=True``: a file is data, never code. Every failure becomes one
  :class:`TorchFileError` (a :class:`~cl_diag.errors.UserError`) whose ``reason`` names which
  of five things went wrong: ``missing`` (no such file, or a folder), ``unreadable`` (the OS
  refused), ``not-torch`` (neither a zip archive nor a pickle), ``damaged`` (truncated,
  corrupt, or a pickle torch cannot read) and ``pickled-code`` (the pickle calls functions or
  classes the weights-only unpickler does not allow, which could run arbitrary code).

One class beyond torch's own allowlist is accepted: ``argparse.Namespace``, which DINO's and
other research code's checkpoints carry as their ``args``. It is a plain attribute bag:
unpickling one only fills its ``__dict__`` and runs no code.

Which failure it was is decided from the file, not from torch's wording (which changes
between releases): the pickle is disassembled with :mod:`pickletools`, which never executes
anything, and every global it would import is compared with torch's allowlist.

What a payload *means* (a cl-diag checkpoint, solo-learn's, a plain state dict, an embeddings
dict) is decided above this layer, in :mod:`cl_diag.models.checkpoints`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickletools
import re
import warnings
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from cl_diag.errors import UserError

__all__ = [
    "EXPANSION_RATIO",
    "EXPANSION_SLACK",
    "PICKLE_HELP",
    "TorchFileError",
    "check_input_file",
    "safe_torch_load",
    "sniff",
    "unsafe_globals",
]

PICKLE_HELP = (
    "cl-diag opens checkpoints with torch.load(weights_only=True), a weights-only load: it only "
    "loads plain tensors and containers, never pickled objects, so no code from a file ever runs. "
    "If you trust the file, re-save only its weights, e.g. "
    "python -c \"import torch; c = torch.load('IN', weights_only=False); "
    "torch.save({'state_dict': c['state_dict']}, 'OUT.ckpt')\", and analyse OUT.ckpt."
)

#: Classes a weights-only load accepts beyond torch's allowlist: plain attribute bags
#: (``args`` in DINO's checkpoints) whose unpickling only fills ``__dict__``.
DATA_CLASSES: tuple[type, ...] = (argparse.Namespace,)

#: How many pickle opcodes :func:`unsafe_globals` reads at most: a real checkpoint's pickle
#: has a few per tensor; the bound keeps a crafted file from making the scan run for ever.
_MAX_OPS = 20_000_000
#: A legacy (non-zip) torch file is several pickles in a row (magic, version, system info,
#: the object, the storage keys); more than this many are not a torch file.
_MAX_PICKLES = 6


class TorchFileError(UserError):
    """The one error of :func:`safe_torch_load`; ``reason`` is one of ``missing``,
    ``unreadable``, ``not-torch``, ``damaged``, ``pickled-code``."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# --------------------------------------------------------------------------- sniffing


def _zip_names(path: Path) -> list[str] | None:
    """The member names of a zip archive, or None when ``path`` is not a readable zip."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def sniff(path: str | os.PathLike[str]) -> str:
    """``"npz"``, ``"torch"`` or ``"other"``, from the file's content (and a ``.npz`` suffix).

    A ``.npz`` suffix counts as npz even when the archive is damaged, so that numpy's own
    error names the problem. Raises OSError when the file cannot be opened.
    """
    path = Path(path)
    if path.suffix.lower() == ".npz":
        return "npz"
    names = _zip_names(path)
    if names and all(name.endswith(".npy") for name in names):
        return "npz"
    with open(path, "rb") as handle:
        magic = handle.read(4)
    # torch.save writes a zip archive (PK..); torch < 1.6 and legacy Lightning files a pickle
    # (protocol 2+, so its first byte is the PROTO opcode 0x80).
    if magic.startswith(b"PK") or magic[:1] == b"\x80":
        return "torch"
    return "other"


def check_input_file(path: str | os.PathLike[str], *, fix: str) -> Path:
    """``path`` as a Path when it names a regular file; TorchFileError otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise TorchFileError(f"No such file: {path} does not exist. {fix}", "missing")
    if not path.is_file():
        raise TorchFileError(f"{path} is not a file. {fix}", "missing")
    return path


# --------------------------------------------------------------------------- pickled code


def _allowed_globals() -> set[str]:
    """The ``module.name`` globals torch's weights-only unpickler accepts."""
    try:  # private, but the very list torch.load applies (and what torch's own
        # get_unsafe_globals_in_checkpoint compares with)
        from torch import _weights_only_unpickler as unpickler

        allowed = set(unpickler._get_allowed_globals()) | set(unpickler._get_user_allowed_globals())
    except (ImportError, AttributeError):  # a torch without them: tensors and containers
        allowed = {"collections.OrderedDict", "_codecs.encode", "builtins.set", "torch.Size"}
    return allowed | {f"{cls.__module__}.{cls.__qualname__}" for cls in DATA_CLASSES}


def _data_classes_allowed() -> contextlib.AbstractContextManager:
    """torch.load accepts :data:`DATA_CLASSES` inside this context (torch >= 2.5; older
    torch refuses them as before). A context, not add_safe_globals: a notebook's own
    torch.load must not change because cl-diag ran."""
    allow = getattr(torch.serialization, "safe_globals", None)
    return allow(list(DATA_CLASSES)) if allow is not None else contextlib.nullcontext()


_STRING_OPS = {
    "STRING",
    "BINSTRING",
    "SHORT_BINSTRING",
    "UNICODE",
    "BINUNICODE",
    "SHORT_BINUNICODE",
    "BINUNICODE8",
}
_MARK = object()


def _pickle_globals(stream: IO[bytes], found: list[str], budget: list[int]) -> None:
    """Append to ``found`` every ``module.name`` one pickle in ``stream`` would import.

    The stack is simulated from pickletools' declared stack effects, only far enough to know
    the two strings below a STACK_GLOBAL (protocol 4+), which may come from the memo.
    Raises whatever pickletools raises on a damaged stream.
    """
    stack: list[Any] = []
    memo: dict[Any, Any] = {}
    for op, arg, _pos in pickletools.genops(stream):
        budget[0] -= 1
        if budget[0] < 0:
            return
        name = op.name
        if name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            found.append(f"{module}.{attr}")
        elif name == "STACK_GLOBAL" and len(stack) >= 2:
            module, attr = stack[-2], stack[-1]
            named = isinstance(module, str) and isinstance(attr, str)
            found.append(f"{module}.{attr}" if named else "?")
        if name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1] if stack else None
            continue
        if name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else None
            continue
        if name == "DUP":
            stack.append(stack[-1] if stack else None)
            continue
        before = op.stack_before
        if pickletools.markobject in before:
            while stack and stack.pop() is not _MARK:
                pass
            below = before.index(pickletools.markobject)
        else:
            below = len(before)
        del stack[max(0, len(stack) - below) :]
        for kind in op.stack_after:
            if kind is pickletools.markobject:
                stack.append(_MARK)
            elif name in _STRING_OPS:
                stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(arg))
            else:
                stack.append(None)


def unsafe_globals(path: str | os.PathLike[str]) -> list[str]:
    """The globals in ``path``'s pickle that weights-only loading refuses, sorted.

    Reads the ``data.pkl`` of a ``torch.save`` zip archive, or the pickles at the start of a
    legacy torch file, with :func:`pickletools.genops`: nothing is imported or executed.
    What could be read before a damaged part is still reported; an unreadable file gives [].
    """
    found: list[str] = []
    budget = [_MAX_OPS]
    try:
        names = _zip_names(Path(path))
        if names is not None:
            member = next((n for n in names if n == "data.pkl" or n.endswith("/data.pkl")), None)
            if member is not None:
                with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
                    _pickle_globals(stream, found, budget)
        else:
            with open(path, "rb") as stream:
                for _ in range(_MAX_PICKLES):
                    if stream.peek(1)[:1] != b"\x80":  # no further pickle (raw storage bytes)
                        break
                    _pickle_globals(stream, found, budget)
    except Exception:
        pass
    allowed = _allowed_globals()
    return sorted({name for name in found if name not in allowed})


# --------------------------------------------------------------------------- loading

#: An archive may declare at most this many bytes beyond EXPANSION_RATIO times its own size:
#: tensors and float arrays barely compress (torch.save stores them uncompressed), while a
#: decompression bomb expands by hundreds or thousands.
EXPANSION_SLACK, EXPANSION_RATIO = 64 << 20, 50


def _zip_expansion(path: Path) -> int | None:
    """The bytes a zip archive's members declare uncompressed; None when it is no zip."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            return sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


# torch's wordings of a refused global across releases, for a file the scan cannot read.
_BLOCKED = re.compile(
    r"Unsupported (?:global|class): (?:GLOBAL )?([\w.]+)|([\w.]+) was not an allowed global"
    r"|Trying to (?:load|unpickle) unsupported GLOBAL ([\w.]+)"
)


def _first_line(text: str, fallback: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else fallback


def safe_torch_load(
    path: str | os.PathLike[str],
    *,
    what: str = "torch checkpoint",
    fix: str = "Check the path, or save the file again with torch.save.",
    map_location: Any = "cpu",
) -> Any:
    """``torch.load(path, weights_only=True)``; every failure is a :class:`TorchFileError`.

    ``what`` names the file the caller expected (e.g. ``"cl-diag checkpoint"``) and ``fix``
    the sentence that tells the user what to do; both go into the message.
    """
    path = check_input_file(path, fix=fix)
    try:
        kind = sniff(path)
    except OSError as exc:
        raise TorchFileError(
            f"Cannot read {path}: {exc.strerror or exc}. Check the path and its permissions.",
            "unreadable",
        ) from None
    if kind != "torch":
        raise TorchFileError(
            f"{path} is not a {what}: it is not a torch file (neither a zip archive nor a "
            f"pickle). {fix}",
            "not-torch",
        )
    expanded = _zip_expansion(path)
    if expanded is not None and expanded > EXPANSION_SLACK + EXPANSION_RATIO * path.stat().st_size:
        raise TorchFileError(
            f"{path} declares {expanded:,} bytes of content in a file of "
            f"{path.stat().st_size:,} bytes (a decompression bomb, or a damaged archive); "
            f"cl-diag refuses to expand it. {fix}",
            "damaged",
        )
    try:
        # e.g. "pickle protocol 4": the message below says it all
        with warnings.catch_warnings(), _data_classes_allowed():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        text, error = str(exc), type(exc).__name__
    code = unsafe_globals(path)
    if not code:
        blocked = _BLOCKED.search(text)
        code = [next(group for group in blocked.groups() if group)] if blocked else []
    if code:
        shown = ", ".join(code[:5]) + (f", ... ({len(code)} in all)" if len(code) > 5 else "")
        raise TorchFileError(
            f"{path} carries pickled code and was refused: its pickle calls {shown}, which "
            f"could run arbitrary code when unpickled. {PICKLE_HELP}",
            "pickled-code",
        )
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    raise TorchFileError(
        f"Could not read {path} with torch.load(weights_only=True) "
        f"({error}: {detail.group(1).strip() if detail else _first_line(text, error)}). "
        f"The file is truncated, damaged or not a {what}. {fix}",
        "damaged",
    )
