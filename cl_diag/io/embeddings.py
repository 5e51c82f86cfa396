"""Reading two views' embeddings from a user's ``.npz`` or ``.pt`` file.

The file holds ``z1`` and ``z2``, two float arrays of shape (n, d) whose row i
are the two views of instance i, and optionally ``labels`` (n,) integers. ``--keys A,B``
(``keys=``) names other arrays as the two views, e.g. a CLIP user's ``image_embeds`` and
``text_embeds``; a name the file lacks is a UserError listing the arrays it holds.
Everything a user can get wrong in the file's format ends in a :class:`UserError`
that names the problem and the fix. The views' values (matching shapes, n >= 2,
no NaN/Inf or zero rows, one label per row) are checked once, where they are
normalised for measuring (:mod:`cl_diag.measurement.inputs`). ``.pt`` files are
read with ``weights_only=True``: a file is data, never code.
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cl_diag.errors import UserError
from cl_diag.io.checkpoints import EXPANSION_RATIO, EXPANSION_SLACK, safe_torch_load, sniff
from cl_diag.io.paths import why_missing
from cl_diag.options import DEFAULT_KEYS, LABELS_KEY

FORMAT_HELP = (
    "An embeddings file is a .npz (numpy.savez) or .pt (torch.save of a dict of tensors) holding "
    "'z1' and 'z2', two float arrays of shape (n, d) whose row i are the two views of instance i, "
    "and optionally 'labels', n integer class labels."
)


@dataclass(frozen=True)
class Embeddings:
    """Two views of n instances, as float32 tensors (not yet normalised)."""

    z1: torch.Tensor
    z2: torch.Tensor
    labels: torch.Tensor | None
    path: str
    sha256: str

    @property
    def n(self) -> int:
        return self.z1.shape[0]

    @property
    def d(self) -> int:
        return self.z1.shape[1]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _npz_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple, np.dtype]:
    """The shape and dtype a .npy member declares, read from its header only."""
    with archive.open(info) as stream:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    return shape, dtype


def _read_npz(path: Path, keys: tuple[str, ...]) -> dict[str, object]:
    """The arrays ``keys`` (the views and labels) from a .npz, after checking what each
    declares against the file; any other member is listed (as None), never loaded."""
    fix = "Re-save it with numpy.savez."
    if not zipfile.is_zipfile(path):
        raise UserError(
            f"Could not read {path}: it is not a .npz archive (not a zip file; a text or other "
            "file renamed?). "
            f"{fix} {FORMAT_HELP}"
        )
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            infos = {
                Path(i.filename).stem: i for i in archive.infolist() if i.filename.endswith(".npy")
            }
            wanted = {key: infos[key] for key in keys if key in infos}
            declared = 0
            for key, info in wanted.items():
                shape, dtype = _npz_header(archive, info)
                if dtype.hasobject:
                    raise UserError(
                        f"Could not read '{key}' in {path}: it holds Python objects (pickled "
                        "data), not numbers; "
                        f"cl-diag never unpickles a file. {fix} {FORMAT_HELP}"
                    )
                declared += math.prod(shape) * dtype.itemsize
            # a .npz is refused before anything is allocated when its arrays need far more than
            # the file holds: float embeddings barely compress, a decompression bomb (0.8 MB of
            # zeros declaring 2 x 400 MB) expands by hundreds
            if declared > EXPANSION_SLACK + EXPANSION_RATIO * size:
                raise UserError(
                    f"{path} declares arrays of {declared:,} bytes in a file of {size:,} bytes "
                    "(a decompression bomb, or a damaged archive); cl-diag refuses to expand it. "
                    f"If it is genuine, re-save it uncompressed with numpy.savez."
                )
        with np.load(path, allow_pickle=False) as npz:
            arrays: dict[str, object] = {key: npz[key] for key in wanted}
            arrays.update({key: None for key in npz.files if key not in wanted})
            return arrays
    except UserError:
        raise
    except Exception as exc:  # corrupt zip, truncated file, a header numpy cannot read...
        raise UserError(
            f"Could not read {path} as a .npz file ({type(exc).__name__}: {exc}). "
            f"{fix} {FORMAT_HELP}"
        ) from None


def _read_arrays(path: Path, keys: tuple[str, ...]) -> dict[str, object]:
    """The arrays of an embeddings file, told apart by content (a .npz renamed .pt is still a
    .npz), then read with numpy or the one safe torch.load."""
    try:
        kind = sniff(path)
    except OSError as exc:
        raise UserError(
            f"Cannot read {path}: {exc.strerror}. Check the path and its permissions."
        ) from None
    if kind == "npz":
        return _read_npz(path, keys)
    if kind != "torch":
        raise UserError(f"{path} is neither a .npz nor a .pt file. {FORMAT_HELP}")
    payload = safe_torch_load(path, what="embeddings file", fix=FORMAT_HELP)
    if not isinstance(payload, dict):
        raise UserError(
            f"{path} holds a {type(payload).__name__}, not a dict of tensors. {FORMAT_HELP}"
        )
    return payload


def _as_tensor(
    value: object, key: str, where: object, fix: str, device: bool = False
) -> torch.Tensor:
    # ``device``: a tensor stays where it is (arrays from Python); a file's are on the CPU
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise UserError(
                f"'{key}' in {where} is a meta tensor: it has a shape but no values. Save the "
                f"tensor itself. {fix}"
            )
        if value.layout != torch.strided:
            raise UserError(
                f"'{key}' in {where} is a sparse tensor ({value.layout}); save it dense "
                f"({key}.to_dense()). {fix}"
            )
        if value.is_quantized:
            raise UserError(
                f"'{key}' in {where} is a quantized tensor ({value.dtype}); save it as floats "
                f"({key}.dequantize()). {fix}"
            )
        if getattr(value, "is_nested", False):
            raise UserError(f"'{key}' in {where} is a nested tensor, not an array. {fix}")
        _refuse_expanded(
            key,
            where,
            value.shape,
            value.stride(),
            value.numel() * 4,
            value.untyped_storage().nbytes(),
        )
        return value.detach() if device else value.detach().cpu()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):
        raise UserError(f"'{key}' in {where} is not a numeric array. {fix}") from None
    base = array
    while isinstance(base.base, np.ndarray):
        base = base.base
    _refuse_expanded(key, where, array.shape, array.strides, array.size * 4, base.nbytes)
    try:
        return torch.as_tensor(numeric_array(array, f"'{key}' in {where}"))
    except (TypeError, ValueError, RuntimeError):
        raise UserError(
            f"'{key}' in {where} has dtype {array.dtype}, which cl-diag cannot read. {fix}"
        ) from None


#: the largest expanded view (a stride-0 broadcast of a smaller array) measured as it is: an
#: expanded view is materialised (float32, contiguous) before measuring, so the memory it takes
#: is its logical size, not its storage's
MAX_EXPANDED_BYTES = 64 << 20


def _refuse_expanded(
    key: str, where: object, shape: tuple, strides: tuple, logical: int, stored: int
) -> None:
    """UserError for an array whose float32 size exceeds both its storage and
    :data:`MAX_EXPANDED_BYTES`: an expanded view (``expand``, ``np.broadcast_to``) that
    measuring would materialise, as a file's expanded views are refused."""
    if logical <= MAX_EXPANDED_BYTES or logical <= stored or 0 not in strides:
        return
    raise UserError(
        f"'{key}' in {where} is an expanded view (strides {tuple(strides)}): its "
        f"{' x '.join(map(str, shape))} elements ({logical:,} bytes as float32) repeat "
        f"{stored:,} bytes, and measuring would materialise them. Pass the array it was "
        "expanded from, or make the view contiguous yourself if its full size is meant."
    )


#: numpy dtype kinds that hold no numbers, in words
_NOT_NUMBERS = {
    "O": "Python objects",
    "U": "text",
    "S": "bytes",
    "V": "raw records",
    "M": "dates and times",
    "m": "time spans",
    "T": "text",
}


def numeric_array(array: np.ndarray, what: str) -> np.ndarray:
    """``array`` in a dtype torch holds, its values unchanged: native byte order (a
    big-endian ``>f4`` array is byte-swapped), extended floats (``float128``, ``longdouble``)
    as float64, unsigned integers torch does not compute with as int64 (uint64 beyond int64 as
    float64). An array that holds no numbers (text, objects, dates, records) is a UserError
    that names its dtype."""
    dtype = array.dtype
    if dtype.kind in _NOT_NUMBERS or dtype.hasobject:
        raise UserError(
            f"{what} has dtype {dtype} ({_NOT_NUMBERS.get(dtype.kind, 'Python objects')}), not "
            "numbers; embeddings must be real numbers and labels whole numbers."
        )
    if dtype.fields is not None or dtype.subdtype is not None:
        raise UserError(f"{what} has a structured dtype {dtype}, not numbers.")
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    if dtype.kind == "f" and dtype.itemsize > 8:
        array = array.astype(np.float64)
    elif dtype.kind == "c" and dtype.itemsize > 16:
        array = array.astype(np.complex128)
    elif dtype.kind == "u" and dtype.itemsize > 1:
        fits = dtype.itemsize < 8 or array.size == 0 or int(array.max()) < 2**63
        array = array.astype(np.int64 if fits else np.float64)
    return array


def _as_float_matrix(
    value: object, key: str, where: object, fix: str, device: bool = False
) -> torch.Tensor:
    array = _as_tensor(value, key, where, fix, device)
    if array.dtype == torch.bool or array.is_complex():
        raise UserError(
            f"'{key}' in {where} has dtype {array.dtype}; embeddings must be real numbers."
        )
    if array.dim() != 2:
        raise UserError(
            f"'{key}' in {where} has shape {tuple(array.shape)}; "
            "it must be 2-D (n instances x d dimensions)."
        )
    return array.to(torch.float32)


def _as_labels(value: object, where: object, fix: str, device: bool = False) -> torch.Tensor:
    """Class labels as int64. Whole-number float labels beyond int64 (1e19, 2e19) would all
    wrap to one value; they are replaced by their rank among the distinct labels instead, which
    keeps every class apart (only the grouping of rows into classes is ever used)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "u" and value.size > 0:
        array: np.ndarray = value.astype(np.uint64)  # either byte order
        if int(array.max()) >= 2**63:  # beyond int64 as well
            _, codes = np.unique(array, return_inverse=True)
            return torch.from_numpy(codes.reshape(array.shape).astype(np.int64))
    raw = _as_tensor(value, "labels", where, fix, device)
    if raw.is_floating_point():
        if not bool(torch.isfinite(raw).all()) or not bool((raw == raw.round()).all()):
            raise UserError(
                f"'labels' in {where} are not whole numbers; give integer class labels."
            )
        if raw.numel() and float(raw.abs().max()) >= 2.0**63:
            host = raw.detach().cpu().to(torch.float64).numpy()
            _, codes = np.unique(host, return_inverse=True)
            return torch.from_numpy(codes.reshape(host.shape).astype(np.int64)).to(raw.device)
    elif raw.dtype == torch.bool or raw.is_complex() or not _integral(raw):
        raise UserError(f"'labels' in {where} have dtype {raw.dtype}; give integer class labels.")
    return raw.to(torch.int64)


def _integral(t: torch.Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


ARRAYS_HELP = (
    "Give z1 and z2 as float arrays (torch tensors or numpy arrays) of shape (n, d) whose row i "
    "are the two views of instance i, and labels (optional) as n integer class labels."
)


def embeddings_from_arrays(
    z1: object, z2: object, labels: object = None, *, where: str = "the arrays given"
) -> Embeddings:
    """Two views from Python (torch tensors or numpy arrays), checked and converted exactly as
    an embeddings file's are (float32 rows, int64 labels), so that measuring them gives the
    numbers ``cl-diag analyze`` gives for the same arrays saved to a file. Tensors stay on
    their device. ``sha256`` is that of the arrays as measured: for z1, z2 and (if given) the
    labels in turn, the name, the shape and the little-endian bytes (float32, int64)."""
    a = _as_float_matrix(z1, "z1", where, ARRAYS_HELP, device=True)
    b = _as_float_matrix(z2, "z2", where, ARRAYS_HELP, device=True)
    codes = None if labels is None else _as_labels(labels, where, ARRAYS_HELP, device=True)
    if a.device != b.device:  # labels may stay on the host: only their grouping is read
        raise UserError(
            f"z1 is on {a.device} and z2 on {b.device} ({where}); give both views on one "
            "device (z2.to(z1.device))."
        )
    digest = hashlib.sha256()
    for key, array in (("z1", a), ("z2", b), ("labels", codes)):
        if array is not None:
            host = array.detach().cpu().contiguous().numpy()
            digest.update(f"{key}{tuple(host.shape)}".encode())
            digest.update(host.astype(host.dtype.newbyteorder("<"), copy=False).tobytes())
    return Embeddings(
        z1=a.contiguous(), z2=b.contiguous(), labels=codes, path=where, sha256=digest.hexdigest()
    )


def missing_keys_message(where: object, missing: list[str], found: list[str], fix: str) -> str:
    """The message for views named that an embeddings file (or dict) lacks: which are missing,
    every array it holds, and ``fix``."""
    shown = ", ".join(repr(k) for k in found) or "nothing"
    absent = " or ".join(repr(m) for m in missing)
    return f"{where} has no {absent} array; it holds {shown}. {fix}"


def load_embeddings(
    path: str | Path,
    *,
    payload: dict | None = None,
    keys: tuple[str, str] | None = None,
    option: str = "--keys A,B",
    labels_key: str | None = None,
) -> Embeddings:
    """Read an embeddings file and check its format (two real 2-D views, whole-number labels);
    UserError on any problem (the values are checked where they are normalised). ``payload``:
    the dict already read from a ``.pt`` file, so it is not loaded twice; ``keys``: the two
    views' arrays (default ``z1``, ``z2``), ``option`` how a message shows that option;
    ``labels_key``: the array of class labels (default ``labels``, optional; a key named
    here must be in the file).
    """
    path = Path(path)
    if not path.exists():
        raise UserError(
            f"No such file: {path} {why_missing(path)}. Give the path of a .npz or .pt "
            "embeddings file."
        )
    if not path.is_file():
        raise UserError(f"{path} is not a file. Give the path of a .npz or .pt embeddings file.")
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise UserError(
            f"Cannot read {path}: {exc.strerror}. Check the path and its permissions."
        ) from None
    named = keys is not None
    first, second = keys if keys is not None else DEFAULT_KEYS
    labelled = labels_key if labels_key is not None else LABELS_KEY
    arrays = payload if payload is not None else _read_arrays(path, (first, second, labelled))
    if not isinstance(arrays, dict):
        raise UserError(
            f"{path} holds a {type(arrays).__name__}, not a dict of tensors. {FORMAT_HELP}"
        )
    missing = [key for key in (first, second) if key not in arrays]
    if labels_key is not None and labels_key not in arrays:
        missing.append(labels_key)
    if missing:
        found = sorted(map(str, arrays))
        if labels_key in missing:
            fix = "Name the labels' array with --labels (or drop it)."
        elif named:
            fix = f"Name two of them with {option}, view 1 first."
        else:
            fix = f"Name the two views' arrays with {option}. {FORMAT_HELP}"
        raise UserError(missing_keys_message(path, missing, found, fix))
    z1 = _as_float_matrix(arrays[first], first, path, FORMAT_HELP)
    z2 = _as_float_matrix(arrays[second], second, path, FORMAT_HELP)
    labels = None
    if arrays.get(labelled) is not None:
        labels = _as_labels(arrays[labelled], path, FORMAT_HELP)
    return Embeddings(
        z1=z1.contiguous(), z2=z2.contiguous(), labels=labels, path=str(path), sha256=digest
    )
