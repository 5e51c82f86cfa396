"""Users' workflows, round three (issue 37): what a user running the documented commands one
after another sees."""

from __future__ import annotations

import shutil


def test_the_default_output_folder_is_not_replaced_without_a_word(run_cli, tmp_path, pairs_file):
    """Before: the README's ``analyze pairs.npz --n-ref 50000`` then ``--pairs sampled`` put the
    second analysis over the first in pairs-analysis/ with nothing said."""
    source = tmp_path / "runs" / "pairs.npz"
    source.parent.mkdir()
    shutil.copy(pairs_file, source)
    first = run_cli("analyze", source, "--n-ref", "50000", "-q")
    assert first.code == 0 and "note:" not in first.err
    second = run_cli("analyze", source, "--pairs", "sampled", "-q")
    assert second.code == 0
    said = " ".join(second.err.split())
    assert f"note: replaced the earlier analysis in {tmp_path / 'runs' / 'pairs-analysis'}" in said
    assert "give --out to keep both" in said
    again = run_cli("analyze", source, "--out", tmp_path / "runs" / "pairs-analysis", "-q")
    assert again.code == 0 and "note:" not in again.err  # an --out given is the user's choice
