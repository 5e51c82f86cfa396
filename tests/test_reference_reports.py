"""The committed reference report reports/toy-vrn/ is exactly what its command produces."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "reports" / "toy-vrn"
# The command in reports/toy-vrn/README.md, run from the repository root.
COMMAND = [
    "sweep",
    "trainers/rebuttal-toy.toml",
    "--grid",
    "seed=1,2,3,4,5",
    "--grid",
    "vrn=0,3",
    "--out",
    "reports/toy-vrn",
    "--quiet",
]
NOT_COMMITTED = {"last.pt", "metrics.csv", "sweep.log"}  # reports/.gitignore


def _committed_files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.name not in NOT_COMMITTED and p.name != "README.md"
    )


@pytest.mark.slow
def test_toy_vrn_reference_report_regenerates_byte_identical(run_cli, tmp_path, monkeypatch):
    # Same relative paths as the README's command, so paths recorded in the results match.
    (tmp_path / "trainers").mkdir()
    shutil.copy(REPO / "trainers" / "rebuttal-toy.toml", tmp_path / "trainers")
    monkeypatch.chdir(tmp_path)
    result = run_cli(*COMMAND)
    assert result.code == 0, result.err

    expected = _committed_files(TOY)
    regenerated = _committed_files(tmp_path / "reports" / "toy-vrn")
    assert (
        len(expected) >= 10 * 5 + 4
    )  # 10 cells x (result.json, 2 reports, 2 figures) + the comparison
    assert regenerated == expected
    for relative in expected:
        assert (tmp_path / "reports" / "toy-vrn" / relative).read_bytes() == (
            TOY / relative
        ).read_bytes(), relative
