"""Bounded memory (issue 11, cases 6 and 7): analyze under an address-space cap (``ulimit -v``,
RLIMIT_AS) with large options and files that declare large sizes.

The child (``capped_cli``, tests/conftest.py) imports cl-diag (torch, numpy, the commands)
first and then caps its address space at what it holds plus 1 GiB, so the cap does not depend
on how much torch maps at import on this machine. Under the cap

* sampled mode with 16 million pairs of each type finishes: it streams chunk by chunk, where the
  sample held at once (about 80 bytes a pair, as before the fix) needs 1.3 GB;
* ``--num-pairs 10^10`` is refused with a message before anything is allocated;
* a .npz that declares 2 x 640 MB in about 1.3 MB of zeros is refused before it expands.

Any allocation past the cap would end the child with a MemoryError traceback, not exit 0 or 2.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADROOM = 1 << 30


def _bomb(path: Path, shape: tuple[int, int]) -> None:
    """A compressed .npz whose z1 and z2 declare ``shape`` float32 zeros, written a block at a
    time so that the test itself never holds the arrays."""
    header = {"descr": "<f4", "fortran_order": False, "shape": shape}
    block = bytes(1 << 22)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in ("z1", "z2"):
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, header)
                left = shape[0] * shape[1] * 4
                while left:
                    member.write(block[: min(left, len(block))])
                    left -= min(left, len(block))


@pytest.mark.slow  # end to end, in processes of its own: the full suite runs it
def test_analyze_stays_within_a_memory_cap(tmp_path, capped_cli):
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((50, 16)).astype(np.float32)
    small = tmp_path / "g50.npz"
    np.savez(small, z1=z1, z2=z1 + 0.1, labels=np.arange(50) % 5)
    bomb = tmp_path / "bomb.npz"
    _bomb(bomb, (40_000, 4_000))
    assert bomb.stat().st_size < 4_000_000
    out = tmp_path / "out"
    commands = [
        ["analyze", str(small), "--pairs", "sampled", "--num-pairs", "16000000", "--out", str(out)],
        ["analyze", str(small), "--pairs", "sampled", "--num-pairs", "10000000000", "--out"],
        ["analyze", str(bomb), "--out", str(tmp_path / "o3")],
    ]
    commands[0].append("-q")
    commands[1].append(str(tmp_path / "o2"))
    child = capped_cli(commands, HEADROOM)
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    assert child.codes == [0, 2, 2], (child.stdout, child.stderr[-3000:])
    err = " ".join(child.stderr.split())
    assert "use --pairs exact" in err
    assert "decompression bomb" in err
    assert (out / "result.json").is_file()
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()
    result = json.loads((out / "result.json").read_text())
    pairs = result["layers"]["embedding"]["pairs"]
    assert pairs["positive"]["count"] == 16_000_000 and pairs["positive"]["estimate"] is True


def _legacy_file_declaring(path: Path, numel: int) -> None:
    """A torch < 1.6 (non-zip) file whose one float storage declares ``numel`` elements but holds
    four: the pickle's number is rewritten, the file stays a few hundred bytes."""
    import struct

    import torch

    torch.save({"z1": torch.zeros(4)}, path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    at = data.index(b"cpu") + len(b"cpu") + 2  # past the location string and its memo put
    assert data[at : at + 2] == b"K\x04"  # BININT1 4: the storage's number of elements
    path.write_bytes(data[:at] + b"J" + struct.pack("<i", numel) + data[at + 2 :])


@pytest.mark.slow
def test_files_declaring_more_than_they_hold_are_refused_under_a_memory_cap(
    tmp_path, run_cli, capped_cli
):
    """Issue 26: the memory a file can make cl-diag take is bounded by what cl-diag reads, not by
    what the file declares. Each file is under a megabyte and declares gigabytes; under the cap
    of what the process holds plus 1 GiB each one is refused with a message (before, each
    allocated past the cap: a MemoryError or allocator traceback, or minutes of swapping)."""
    import torch

    # stride-0 (expanded) views: 2 x 1.6 GB from one stored number each
    huge = torch.zeros(1, 1).expand(100_000, 4_000)
    torch.save({"z1": huge, "z2": huge}, tmp_path / "expanded.pt")
    # a cl-diag checkpoint whose toy embeddings are expanded views
    run = tmp_path / "toy"
    assert (
        run_cli(
            "train",
            ROOT / "trainers" / "rebuttal-toy.toml",
            "--steps",
            "2",
            "--out",
            run,
            "--quiet",
        ).code
        == 0
    )
    checkpoint = torch.load(run / "last.pt", weights_only=True)
    checkpoint["embeddings"] = {"z1": torch.zeros(1, 3).expand(200_000_000, 3)} | {
        "z2": torch.zeros(1, 3).expand(200_000_000, 3)
    }
    torch.save(checkpoint, tmp_path / "toy.pt")
    # a foreign state dict whose head (dropped: it is not the backbone) is an expanded 1 GiB
    stem = {
        "conv1.weight": torch.randn(8, 3, 3, 3),
        "fc.weight": torch.zeros(1, 1).expand(16384, 16384),
    }
    torch.save(stem, tmp_path / "foreign.pt")
    # lists shared through the pickle's memo: one row of 2,000 floats, referenced 2 x 100,000
    row = [0.5] * 2_000
    torch.save({"z1": [row] * 100_000, "z2": [row] * 100_000}, tmp_path / "shared.pt")
    # a legacy file whose storage declares 8 GB
    _legacy_file_declaring(tmp_path / "legacy.pt", 2_000_000_000)
    for name in ("expanded.pt", "toy.pt", "foreign.pt", "shared.pt", "legacy.pt"):
        assert (tmp_path / name).stat().st_size < 1_000_000, name

    cases = {
        "expanded.pt": "is an expanded view",
        "toy.pt": "'embeddings.z1' is an expanded view",
        "foreign.pt": "'fc.weight' is an expanded view",
        "shared.pt": "once its shared parts are expanded",
        "legacy.pt": "declares storages of 8,000,000,000 bytes",
    }
    commands = [
        ["analyze", str(tmp_path / name), "--out", str(tmp_path / f"o-{name}")] for name in cases
    ]
    commands[2] += ["--arch", "resnet18"]
    child = capped_cli(commands, HEADROOM)
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    assert child.codes == [2] * len(cases), (child.stdout, child.stderr[-3000:])
    err = " ".join(child.stderr.split())
    for fragment in cases.values():
        assert fragment in err, (fragment, err[-3000:])
    assert not any((tmp_path / f"o-{name}").exists() for name in cases)


def test_the_weights_fingerprint_hashes_a_view_a_chunk_at_a_time(monkeypatch):
    """The fingerprint of a non-contiguous or expanded tensor equals that of its contiguous copy,
    without making one: it hashes row-major chunks of at most _CHUNK_BYTES."""
    import hashlib

    import torch

    from cl_diag.models import checkpoints

    monkeypatch.setattr(checkpoints, "_CHUNK_BYTES", 64)
    base = torch.arange(600, dtype=torch.float32).reshape(6, 100)
    for tensor in (base, base.t(), base[:, ::7], torch.ones(1, 1).expand(40, 90), base[2]):
        whole = tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        pieces = list(checkpoints._row_major_chunks(tensor))
        assert all(p.numel() * p.element_size() <= max(64, tensor.shape[-1] * 4) for p in pieces)
        joined = b"".join(
            p.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() for p in pieces
        )
        assert hashlib.sha256(joined).digest() == hashlib.sha256(whole).digest()
    assert checkpoints.tensors_sha256({"w": base.t()}) == checkpoints.tensors_sha256(
        {"w": base.t().contiguous()}
    )
