"""The one safe torch.load and the one atomic writer of cl_diag.io."""

from __future__ import annotations

import ast
import io
import json
import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

import cl_diag
from cl_diag.errors import UserError
from cl_diag.io import atomic
from cl_diag.io.atomic import atomic_write, atomic_write_bytes, atomic_write_text
from cl_diag.io.checkpoints import TorchFileError, safe_torch_load, unsafe_globals
from cl_diag.io.output import write_json
from cl_diag.io.signals import Terminated
from cl_diag.io.synthetic import save_npz_atomically


class _Payload:
    """Unpickling this object would create a marker file: it must never happen."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def _evil_files(tmp_path: Path, marker: Path) -> dict[str, Path]:
    """The same pickled payload in every form a torch file can take."""
    obj = {"w": torch.zeros(2), "x": _Payload(str(marker))}
    zipped = tmp_path / "zip.pt"
    torch.save(obj, zipped)
    legacy = tmp_path / "legacy.pt"
    torch.save(obj, legacy, _use_new_zipfile_serialization=False)
    files = {"zip": zipped, "legacy": legacy}
    for protocol in (2, 4, 5):  # raw pickles; 4+ name globals with STACK_GLOBAL via the memo
        raw = tmp_path / f"raw{protocol}.pt"
        raw.write_bytes(pickle.dumps({"a": [1, 2], "x": _Payload(str(marker))}, protocol=protocol))
        files[f"raw{protocol}"] = raw
    return files


# --------------------------------------------------------------------------- the safe loader


def test_a_plain_file_loads(tmp_path):
    path = tmp_path / "ok.pt"
    torch.save({"w": torch.arange(3.0), "n": 2, "names": ["a"]}, path)
    got = safe_torch_load(path)
    assert torch.equal(got["w"], torch.arange(3.0)) and got["n"] == 2 and got["names"] == ["a"]
    assert unsafe_globals(path) == []


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(TorchFileError, match="No such file") as missing:
        safe_torch_load(tmp_path / "nope.pt", fix="Give another path.")
    assert missing.value.reason == "missing" and "Give another path." in str(missing.value)
    with pytest.raises(TorchFileError, match="is not a file") as folder:
        safe_torch_load(tmp_path)
    assert folder.value.reason == "missing"
    assert isinstance(folder.value, UserError)


def test_not_a_torch_file(tmp_path):
    text = tmp_path / "notes.pt"
    text.write_text("just some text\n")
    expected = "is not a cl-diag checkpoint: it is not a torch file"
    with pytest.raises(TorchFileError, match=expected) as info:
        safe_torch_load(text, what="cl-diag checkpoint")
    assert info.value.reason == "not-torch"


@pytest.mark.parametrize("legacy", [False, True])
def test_truncated_file_is_damaged(tmp_path, legacy):
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.randn(64, 64)}, path, _use_new_zipfile_serialization=not legacy)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    expected = "truncated, damaged or not a torch checkpoint"
    with pytest.raises(TorchFileError, match=expected) as info:
        safe_torch_load(path)
    assert info.value.reason == "damaged"
    if legacy:  # issue 26: refused from its declared storage sizes, before torch.load runs
        assert "declares storages of 16,384 bytes" in str(info.value)
    else:
        assert "weights_only=True" in str(info.value)


@pytest.mark.parametrize("form", ["zip", "legacy", "raw2", "raw4", "raw5"])
def test_pickled_code_is_refused_and_never_runs(tmp_path, form):
    marker = tmp_path / "pwned"
    path = _evil_files(tmp_path, marker)[form]
    assert unsafe_globals(path) == ["io.open"]  # found by disassembly, nothing executed
    with pytest.raises(TorchFileError) as info:
        safe_torch_load(path)
    message = " ".join(str(info.value).split())
    assert info.value.reason == "pickled-code"
    assert "carries pickled code and was refused" in message and "io.open" in message
    assert "weights_only=True" in message
    assert not marker.exists()


def test_pickled_code_is_named_whatever_torch_says(tmp_path, monkeypatch):
    """torch words a refused global differently across releases (2.14 changed it): the
    verdict comes from the file, not from the wording of torch's message."""
    marker = tmp_path / "pwned"
    path = _evil_files(tmp_path, marker)["zip"]

    def reworded(*args, **kwargs):
        raise pickle.UnpicklingError("Weights only load failed: blocked callable (a new wording)")

    monkeypatch.setattr(torch, "load", reworded)
    with pytest.raises(TorchFileError, match="carries pickled code and was refused") as info:
        safe_torch_load(path)
    assert info.value.reason == "pickled-code" and not marker.exists()


def test_a_torch_message_naming_a_global_counts_when_the_scan_finds_nothing(tmp_path, monkeypatch):
    path = tmp_path / "ok.pt"
    torch.save({"w": torch.zeros(1)}, path)

    def refused(*args, **kwargs):
        raise pickle.UnpicklingError("WeightsUnpickler error: Unsupported global: GLOBAL evil.run")

    monkeypatch.setattr(torch, "load", refused)
    with pytest.raises(TorchFileError, match=r"evil\.run") as info:
        safe_torch_load(path)
    assert info.value.reason == "pickled-code"


def test_every_reader_refuses_pickled_code_through_the_one_loader(tmp_path):
    from cl_diag.io.embeddings import load_embeddings
    from cl_diag.models import read_checkpoint_file
    from cl_diag.training.checkpoint import FORMAT, load_checkpoint

    marker = tmp_path / "pwned"
    checkpoint = tmp_path / "last.pt"
    torch.save({"format": FORMAT, "x": _Payload(str(marker))}, checkpoint)
    embeddings = tmp_path / "views.pt"
    views = {"z1": torch.ones(3, 2), "z2": torch.ones(3, 2), "x": _Payload(str(marker))}
    torch.save(views, embeddings)
    readers = (
        (load_checkpoint, checkpoint),
        (read_checkpoint_file, checkpoint),
        (load_embeddings, embeddings),
    )
    for read, path in readers:
        with pytest.raises(TorchFileError, match="carries pickled code and was refused") as info:
            read(path)
        assert info.value.reason == "pickled-code"
    assert not marker.exists()


def _modules_calling(owner: str, attribute: str) -> list[str]:
    """The package's modules with a call ``owner.attribute(...)`` (docstrings do not count)."""
    root = Path(cl_diag.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and func.attr == attribute
                and isinstance(func.value, ast.Name)
                and func.value.id == owner
            ):
                found.add(str(path.relative_to(root)))
    return sorted(found)


def test_the_package_has_one_torch_load():
    """Every other module reads torch files through safe_torch_load."""
    assert _modules_calling("torch", "load") == ["io/checkpoints.py"]


# --------------------------------------------------------------------------- the atomic writer


def test_a_failure_mid_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(b"old content")

    def half_then_fail(handle):
        handle.write(b"new con")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]

    def interrupted(handle):
        handle.write(b"x" * 1000)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, interrupted)
    assert path.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


@pytest.mark.parametrize("signal_error", [KeyboardInterrupt, Terminated])
@pytest.mark.parametrize("failing_write", [1, 2, 3, 5])
def test_an_interrupt_inside_torch_save_stays_an_interrupt(tmp_path, signal_error, failing_write):
    """torch.save turns an interrupt during its writes into a RuntimeError ("unexpected pos",
    from closing its zip writer) whose context is the interrupt; a checkpoint written when the
    signal came must stop the command as the signal does, not as a crash with a traceback."""
    path = tmp_path / "last.pt"
    path.write_bytes(b"old content")

    class Interrupted(io.RawIOBase):
        def __init__(self):
            self.calls = 0

        def writable(self):
            return True

        def write(self, data):
            self.calls += 1
            if self.calls == failing_write:
                raise signal_error
            return len(data)

    def save(handle):
        torch.save({"weights": torch.zeros(10_000), "step": torch.ones(10)}, Interrupted())

    with pytest.raises(signal_error) as caught:
        atomic_write(path, save)
    assert type(caught.value) is signal_error
    assert path.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_a_failed_fsync_or_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "metrics.csv"
    atomic_write_text(path, "a,b\n1,2\n")
    for name in ("fsync", "replace"):
        with monkeypatch.context() as patch:

            def fail(*args, **kwargs):
                raise OSError(5, "Input/output error")

            patch.setattr(atomic.os, name, fail)
            with pytest.raises(OSError):
                atomic_write_text(path, "a,b\n3,4\n")
        assert path.read_text() == "a,b\n1,2\n"
        assert [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]


def test_written_bytes_and_permissions(tmp_path):
    path = tmp_path / "report.md"
    atomic_write_text(path, "line one\nline two – é\n")
    # UTF-8 and no newline translation
    assert path.read_bytes() == "line one\nline two – é\n".encode()
    umask = os.umask(0)
    os.umask(umask)
    # what open() gives a new file, not mkstemp's 0600
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    os.chmod(path, 0o640)
    atomic_write_bytes(path, b"again")
    assert path.read_bytes() == b"again" and stat.S_IMODE(path.stat().st_mode) == 0o640


def test_json_npz_and_checkpoint_writers_go_through_it(tmp_path, monkeypatch):
    from cl_diag.training.checkpoint import save_checkpoint

    result, arrays = tmp_path / "result.json", tmp_path / "pairs.npz"
    checkpoint = tmp_path / "last.pt"
    write_json(result, {"a": 1.5, "b": float("nan")})
    assert json.loads(result.read_text()) == {"a": 1.5, "b": None}
    save_npz_atomically(arrays, {"z1": np.ones((2, 2), np.float32)})
    save_checkpoint(checkpoint, {"format": "x", "w": torch.ones(2)})
    before = {p: p.read_bytes() for p in (result, arrays, checkpoint)}

    calls: list[Path] = []
    real = atomic.atomic_write

    def spy(path, write):  # the real writer, with a disk that fills up after the payload
        calls.append(Path(path))

        def write_then_fail(handle):
            write(handle)
            raise OSError(28, "full")

        return real(path, write_then_fail)

    for module in ("cl_diag.io.output", "cl_diag.io.synthetic", "cl_diag.training.checkpoint"):
        monkeypatch.setattr(f"{module}.atomic_write", spy, raising=False)
    monkeypatch.setattr(atomic, "atomic_write", spy)
    with pytest.raises(OSError):
        write_json(result, {"a": 2})
    with pytest.raises(UserError, match=r"Cannot write .*pairs\.npz: full"):
        save_npz_atomically(arrays, {"z1": np.zeros((2, 2), np.float32)})
    with pytest.raises(OSError):
        save_checkpoint(checkpoint, {"format": "y"})
    assert calls == [result, arrays, checkpoint]
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt", "pairs.npz", "result.json"]


def test_the_package_has_one_atomic_writer():
    """Only cl_diag/io/atomic.py makes temporary files to rename over a target."""
    assert _modules_calling("tempfile", "mkstemp") == ["io/atomic.py"]
