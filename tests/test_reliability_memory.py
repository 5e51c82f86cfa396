"""Bounded memory (issue 11, cases 6 and 7): analyze under an address-space cap (``ulimit -v``,
RLIMIT_AS) with large options and files that declare large sizes.

The child imports cl-diag (torch, numpy, the commands) first and then caps its address space at
what it holds plus 1 GiB, so the cap does not depend on how much torch maps at import on this
machine. Under the cap

* sampled mode with 16 million pairs of each type finishes: it streams chunk by chunk, where the
  sample held at once (about 80 bytes a pair, as before the fix) needs 1.3 GB;
* ``--num-pairs 10^10`` is refused with a message before anything is allocated;
* a .npz that declares 2 x 640 MB in about 1.3 MB of zeros is refused before it expands.

Any allocation past the cap would end the child with a MemoryError traceback, not exit 0 or 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADROOM = 1 << 30

_CHILD = """
import resource, sys
import cl_diag.orchestration.analyze  # noqa: F401  (torch, numpy, the measuring: mapped before
import cl_diag.orchestration.train  # noqa: F401  the cap; the command line imports them lazily)
from cl_diag.cli import main


def vm(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024


base = vm("VmSize")
resource.setrlimit(resource.RLIMIT_AS, (base + int(sys.argv[1]), resource.RLIM_INFINITY))
codes = []
for command in sys.argv[2:]:
    try:
        main(command.split("|"))
    except SystemExit as exc:
        codes.append(exc.code)
print("codes", codes, "grew", (vm("VmPeak") - base) >> 20, "MiB")
"""


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
def test_analyze_stays_within_a_memory_cap(tmp_path):
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((50, 16)).astype(np.float32)
    small = tmp_path / "g50.npz"
    np.savez(small, z1=z1, z2=z1 + 0.1, labels=np.arange(50) % 5)
    bomb = tmp_path / "bomb.npz"
    _bomb(bomb, (40_000, 4_000))
    assert bomb.stat().st_size < 4_000_000
    out = tmp_path / "out"
    commands = [
        f"analyze|{small}|--pairs|sampled|--num-pairs|16000000|--out|{out}|-q",
        f"analyze|{small}|--pairs|sampled|--num-pairs|10000000000|--out|{tmp_path / 'o2'}",
        f"analyze|{bomb}|--out|{tmp_path / 'o3'}",
    ]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(HEADROOM), *commands],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    assert "codes [0, 2, 2]" in child.stdout, (child.stdout, child.stderr[-3000:])
    err = " ".join(child.stderr.split())
    assert "use --pairs exact" in err
    assert "decompression bomb" in err
    assert (out / "result.json").is_file()
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()
    result = json.loads((out / "result.json").read_text())
    pairs = result["layers"]["embedding"]["pairs"]
    assert pairs["positive"]["count"] == 16_000_000 and pairs["positive"]["estimate"] is True
