"""Reading a user's torch file safely: what kind of file it is, and its one safe ``torch.load``.
What a loaded payload *means* is decided a layer up, in :mod:`cl_diag.models.checkpoints`.

* :func:`sniff` tells an ``.npz`` archive, a torch file (zip, or a legacy raw pickle) and
  anything else apart by content.
* :func:`safe_torch_load` is the package's only ``torch.load``, always ``weights_only=True``:
  a file is data, never code. Every failure is one :class:`TorchFileError` whose ``reason`` is
  ``missing``, ``unreadable``, ``not-torch``, ``damaged``, ``pickled-code`` or ``too-large``,
  decided from the file (the pickle disassembled with :mod:`pickletools`, which executes
  nothing), not from torch's wording. Beyond torch's allowlist it accepts data that runs no
  code when unpickled: ``argparse.Namespace`` (DINO's ``args``) and numpy arrays, dtypes and
  scalars.

Memory is bounded by what cl-diag allocates, not by what the file declares
(:func:`check_decoded_size`): a legacy file's storage sizes are checked against its size
before loading, and the loaded payload is measured with every shared reference expanded
(a stride-0 view at its logical size, a memo-repeated list at each use) and refused beyond
:data:`EXPANSION_SLACK` plus :data:`EXPANSION_RATIO` times the file's size.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickletools
import re
import sys
import warnings
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from cl_diag.errors import UserError
from cl_diag.io.paths import why_missing

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
    ``unreadable``, ``not-torch``, ``damaged``, ``pickled-code``, ``too-large``."""

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
    """``"npz"``, ``"torch"`` or ``"other"``, from the file's content, whatever its suffix: a
    zip of ``.npy`` members is an npz, one with a ``data.pkl`` or a raw pickle a torch file; only
    a damaged archive falls back on its suffix. OSError when the file cannot be opened.
    """
    path = Path(path)
    names = _zip_names(path)
    if names:
        if all(name.endswith(".npy") for name in names):
            return "npz"
        if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
            return "torch"
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if path.suffix.lower() == ".npz":
        return "npz"
    # torch.save writes a zip archive (PK..); torch < 1.6 and legacy Lightning files a pickle
    # (protocol 2+, so its first byte is the PROTO opcode 0x80).
    if magic.startswith(b"PK") or magic[:1] == b"\x80":
        return "torch"
    return "other"


def check_input_file(path: str | os.PathLike[str], *, fix: str) -> Path:
    """``path`` as a Path when it names a regular file; TorchFileError otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise TorchFileError(f"No such file: {path} {why_missing(path)}. {fix}", "missing")
    if not path.is_file():
        raise TorchFileError(f"{path} is not a file. {fix}", "missing")
    return path


# --------------------------------------------------------------------------- pickled code


def _numpy_globals() -> list[tuple[Any, str]]:
    """numpy's array, dtype and scalar rebuilders with every name a file may give them (numpy 1
    pickles ``numpy.core.multiarray``, numpy 2 ``numpy._core.multiarray``), plus numpy 2's
    dtype classes: data, rebuilt from a shape, a dtype and bytes, never code."""
    import numpy as np

    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1
        from numpy.core import multiarray  # type: ignore[no-redef]
    pairs: list[tuple[Any, str]] = []
    for name in ("_reconstruct", "scalar"):
        function = getattr(multiarray, name)
        pairs += [(function, f"numpy.core.multiarray.{name}")]
        pairs += [(function, f"numpy._core.multiarray.{name}")]
    pairs += [(np.ndarray, "numpy.ndarray"), (np.dtype, "numpy.dtype")]
    dtypes = getattr(np, "dtypes", None)
    for name in dir(dtypes) if dtypes is not None else ():
        cls = getattr(dtypes, name)
        if isinstance(cls, type) and issubclass(cls, np.dtype):
            pairs.append((cls, f"numpy.dtypes.{name}"))
    return pairs


def _allowed_globals() -> set[str]:
    """The ``module.name`` globals the loading accepts: torch's allowlist and the data above."""
    try:  # private, but the very list torch.load applies (and what torch's own
        # get_unsafe_globals_in_checkpoint compares with)
        from torch import _weights_only_unpickler as unpickler

        allowed = set(unpickler._get_allowed_globals()) | set(unpickler._get_user_allowed_globals())
    except (ImportError, AttributeError):  # a torch without them: tensors and containers
        allowed = {"collections.OrderedDict", "_codecs.encode", "builtins.set", "torch.Size"}
    allowed |= {f"{cls.__module__}.{cls.__qualname__}" for cls in DATA_CLASSES}
    return allowed | {name for _, name in _numpy_globals()}


def _data_classes_allowed() -> contextlib.AbstractContextManager:
    """torch.load accepts :data:`DATA_CLASSES` and numpy's arrays inside this context (torch
    >= 2.5; older torch refuses them as before). A context, not add_safe_globals: a notebook's
    own torch.load must not change because cl-diag ran."""
    allow = getattr(torch.serialization, "safe_globals", None)
    if allow is None:
        return contextlib.nullcontext()
    return allow([*DATA_CLASSES, *_numpy_globals()])


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


_INT_OPS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"}
_TUPLE_OPS = {"TUPLE": None, "EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}


class _Global(str):
    """A global the simulated stack holds (its ``module.name``)."""


def _pickle_globals(
    stream: IO[bytes],
    found: list[str],
    budget: list[int],
    storages: list[tuple[str, str, int]] | None = None,
) -> None:
    """Append to ``found`` every ``module.name`` one pickle in ``stream`` would import, and to
    ``storages`` the ``(storage type, key, number of elements)`` of every storage it refers to
    (a torch persistent id ``('storage', type, key, location, numel)``; a storage shared by
    several tensors is referred to once per tensor).

    The stack is simulated from pickletools' declared stack effects, only far enough to know
    the two strings below a STACK_GLOBAL (protocol 4+), which may come from the memo, and the
    tuples of strings, globals and integers that persistent ids are.
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
        if name in _TUPLE_OPS:
            count = _TUPLE_OPS[name]
            if count is None:  # TUPLE: everything above the mark
                items: list[Any] = []
                while stack and (item := stack.pop()) is not _MARK:
                    items.append(item)
                items.reverse()
            else:
                items = stack[len(stack) - count :] if count else []
                del stack[len(stack) - count :]
            stack.append(tuple(items))
            continue
        if name == "BINPERSID" and storages is not None and stack:
            pid = stack[-1]
            if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
                kind, key, numel = pid[1], pid[2], pid[4]
                if isinstance(kind, str) and isinstance(numel, int):
                    storages.append((str(kind), str(key), numel))
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
            elif name in _INT_OPS:
                stack.append(arg)
            elif name in ("GLOBAL", "INST"):
                stack.append(_Global(str(arg).replace(" ", ".")))
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
                _legacy_pickles(stream, found, budget, None)
    except Exception:
        pass
    allowed = _allowed_globals()
    return sorted({name for name in found if name not in allowed})


def _legacy_pickles(
    stream: IO[bytes], found: list[str], budget: list[int], storages: list | None
) -> None:
    for _ in range(_MAX_PICKLES):
        if stream.peek(1)[:1] != b"\x80":  # type: ignore[attr-defined]  # no further pickle
            break
        _pickle_globals(stream, found, budget, storages)


def _element_size(storage_type: str) -> int:
    """Bytes per element of a legacy storage type (``torch.FloatStorage``: 4); 1 for an
    untyped or unknown one (the smallest: a declaration is never over-counted)."""
    module, _, name = storage_type.rpartition(".")
    if module != "torch" or not name.endswith("Storage"):
        return 1
    with warnings.catch_warnings():  # the legacy storage classes are deprecated
        warnings.simplefilter("ignore")
        dtype = getattr(getattr(torch, name, None), "dtype", None)
        return torch.empty(0, dtype=dtype).element_size() if isinstance(dtype, torch.dtype) else 1


def declared_storage_bytes(path: str | os.PathLike[str]) -> int:
    """The bytes the storages of a legacy (non-zip) torch file declare, read from its pickle
    without loading anything (0 when the pickle cannot be read: torch.load says why)."""
    storages: list[tuple[str, str, int]] = []
    try:
        with open(path, "rb") as stream:
            _legacy_pickles(stream, [], [_MAX_OPS], storages)
    except Exception:
        pass
    declared = {key: max(numel, 0) * _element_size(kind) for kind, key, numel in storages}
    return sum(declared.values())


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


def expansion_bound(size: int) -> int:
    """The most bytes a file of ``size`` bytes may expand to when read (see
    :data:`EXPANSION_SLACK`)."""
    return EXPANSION_SLACK + EXPANSION_RATIO * size


#: containers nested deeper than this are no checkpoint (a real one nests a few levels)
MAX_DEPTH = 100
#: bytes counted for a number, a flag, None or any small object, and per slot of a container
_SLOT = 8


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _tensor_problem(key: str, tensor: torch.Tensor, limit: int) -> str | None:
    """Why a tensor read from a file cannot be used as it is declared, or None."""
    if tensor.is_meta or tensor.layout != torch.strided or tensor.is_quantized:
        return None  # no data to expand; named by the reader that needs the values
    logical = tensor.numel() * tensor.element_size()
    if logical <= limit:
        return None
    stored = tensor.untyped_storage().nbytes()
    if logical > stored:
        return (
            f"'{key}' is an expanded view (strides {tuple(tensor.stride())}): its "
            f"{' x '.join(map(str, tensor.shape))} elements ({logical:,} bytes) are "
            f"{stored:,} bytes repeated. "
            "Save the tensor it was expanded from, or .contiguous() the view before saving if "
            "its full size is meant"
        )
    return None


def decoded_size(payload: Any, *, limit: int) -> int:
    """The bytes ``payload`` (what torch.load returned) takes once every shared reference is
    expanded: a tensor counts its logical size (an expanded view of a tiny storage counts
    every element), an object used twice through the pickle's memo counts twice. Raises
    :class:`_Refused` for a payload deeper than :data:`MAX_DEPTH`, a container that holds
    itself, or an expanded tensor larger than ``limit``. Each object is measured once."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def measure(node: Any, key: str, depth: int) -> int:
        kind = type(node)
        if kind in (int, float, bool, complex) or node is None:
            return _SLOT
        if kind in (str, bytes, bytearray):
            return _SLOT + len(node)
        ident = id(node)
        if ident in sizes:
            return sizes[ident]
        if depth > MAX_DEPTH:
            raise _Refused(f"it nests containers more than {MAX_DEPTH} levels deep (at '{key}')")
        if ident in active:
            raise _Refused(f"'{key}' holds itself (a container that contains itself)")
        active.add(ident)
        try:
            size = _measure_node(node, key, depth)
        finally:
            active.discard(ident)
        sizes[ident] = size
        return size

    def _measure_node(node: Any, key: str, depth: int) -> int:
        if isinstance(node, torch.Tensor):
            problem = _tensor_problem(key, node, limit)
            if problem is not None:
                raise _Refused(problem)
            return _SLOT + node.numel() * node.element_size()
        if isinstance(node, dict):
            total = _SLOT
            for name, value in node.items():
                total += measure(name, key, depth + 1)
                total += measure(value, f"{key}.{name}" if key else str(name), depth + 1)
            return total
        if isinstance(node, (list, tuple, set, frozenset)):
            total = _SLOT
            for index, item in enumerate(node):
                total += measure(item, f"{key}[{index}]", depth + 1)
            return total
        if isinstance(node, argparse.Namespace):
            return _SLOT + measure(vars(node), key, depth + 1)
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(node, numpy.ndarray):
            if node.dtype.hasobject:
                return _SLOT + sum(
                    measure(item, f"{key}[{i}]", depth + 1) for i, item in enumerate(node.flat)
                )
            return _SLOT + int(node.nbytes)
        return _SLOT

    return measure(payload, "", 0)


def check_decoded_size(payload: Any, path: Path, *, fix: str) -> None:
    """Refuse (TorchFileError, ``too-large``) a payload that would take more memory than
    :func:`expansion_bound` of the file's size once expanded (see :func:`decoded_size`)."""
    size = path.stat().st_size
    limit = expansion_bound(size)
    try:
        total = decoded_size(payload, limit=limit)
    except _Refused as refused:
        raise TorchFileError(
            f"{path} cannot be read as it is: {refused.message}. cl-diag never lets a file's "
            f"declarations decide how much memory it takes. {fix}",
            "too-large",
        ) from None
    except RecursionError:
        raise TorchFileError(
            f"{path} cannot be read as it is: it nests containers too deeply. {fix}", "too-large"
        ) from None
    if total > limit:
        raise TorchFileError(
            f"{path} holds {total:,} bytes once its shared parts are expanded (the same lists, "
            f"arrays or tensors referenced again and again) in a file of {size:,} bytes; "
            f"cl-diag reads at most {limit:,} bytes from a file this size, and refuses it. "
            f"Save each array once, as a tensor. {fix}",
            "too-large",
        )


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
    if expanded is not None and expanded > expansion_bound(path.stat().st_size):
        raise TorchFileError(
            f"{path} declares {expanded:,} bytes of content in a file of "
            f"{path.stat().st_size:,} bytes (a decompression bomb, or a damaged archive); "
            f"cl-diag refuses to expand it. {fix}",
            "damaged",
        )
    size = path.stat().st_size
    if expanded is None:  # a legacy file: torch allocates its storages as declared
        declared = declared_storage_bytes(path)
        if declared > size:
            raise TorchFileError(
                f"{path} declares storages of {declared:,} bytes in a file of {size:,} bytes: "
                f"it is truncated, damaged or not a {what} (or crafted to make a reader "
                f"allocate them); cl-diag refuses to. {fix}",
                "damaged",
            )
    try:
        # e.g. "pickle protocol 4": the message below says it all
        with warnings.catch_warnings(), _data_classes_allowed():
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        text, error = str(exc), type(exc).__name__
    else:
        check_decoded_size(payload, path, fix=fix)
        return payload
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
