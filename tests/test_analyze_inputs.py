"""Every bad input to ``cl-diag analyze`` on an embeddings file: exit 2, a message, no output."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def _save_npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _good(n=5, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((n, d)).astype(
        np.float32
    )


def _assert_refused(result, out, *fragments):
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err + result.out
    message = " ".join(result.err.split()).lower()
    for fragment in fragments:
        assert fragment.lower() in message, (fragment, result.err)
    assert not out.exists(), "no output may be left behind"
    leftovers = [p.name for p in out.parent.iterdir() if ".staging-" in p.name]
    assert leftovers == []


def test_missing_file(run_cli, tmp_path):
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", tmp_path / "nope.npz", "--out", out), out, "no such file")


def test_directory_instead_of_file(run_cli, tmp_path):
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", tmp_path, "--out", out), out, "is not a file")


def test_not_npz_or_pt(run_cli, tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("1,2,3\n")
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "neither a .npz nor a .pt")


def test_corrupt_npz(run_cli, tmp_path):
    path = tmp_path / "pairs.npz"
    path.write_bytes(b"PK\x03\x04 this is not really a zip")
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "could not read")


def test_truncated_pt(run_cli, tmp_path):
    z1, z2 = _good()
    path = tmp_path / "pairs.pt"
    torch.save({"z1": torch.from_numpy(z1), "z2": torch.from_numpy(z2)}, path)
    path.write_bytes(path.read_bytes()[:50])
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "weights_only")


class _Marker:
    """Unpickling this object would create a marker file: it must never happen."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_pickled_payload_is_refused_without_running_it(run_cli, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"z1": torch.zeros(2, 2), "z2": torch.zeros(2, 2), "x": _Marker(str(marker))}, path)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "never pickled objects")
    assert not marker.exists()


def test_pickled_npz_object_array_is_refused(run_cli, tmp_path):
    path = tmp_path / "pairs.npz"
    np.savez(path, z1=np.array([object(), object()], dtype=object), z2=np.zeros((2, 2)))
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "could not read")


def test_pt_that_is_not_a_dict(run_cli, tmp_path):
    path = tmp_path / "pairs.pt"
    torch.save(torch.zeros(3, 3), path)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "not a dict")


@pytest.mark.parametrize("missing", ["z1", "z2"])
def test_missing_view(run_cli, tmp_path, missing):
    z1, z2 = _good()
    arrays = {"z1": z1, "z2": z2}
    del arrays[missing]
    path = _save_npz(tmp_path / "pairs.npz", **arrays)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, f"has no '{missing}'")


def test_shapes_differ(run_cli, tmp_path):
    z1, _ = _good(5, 3)
    _, z2 = _good(5, 4)
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2)
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", path, "--out", out), out, "differ in shape", "(5, 3)", "(5, 4)"
    )


def test_not_two_dimensional(run_cli, tmp_path):
    path = _save_npz(tmp_path / "pairs.npz", z1=np.zeros(5), z2=np.zeros(5))
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "must be 2-d")


def test_single_instance(run_cli, tmp_path):
    z1, z2 = _good(1, 3)
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "n = 1", "at least 2")


def test_zero_dimensions(run_cli, tmp_path):
    path = _save_npz(
        tmp_path / "pairs.npz", z1=np.zeros((4, 0), np.float32), z2=np.zeros((4, 0), np.float32)
    )
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "d = 0")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(run_cli, tmp_path, bad):
    z1, z2 = _good()
    z2[3, 1] = bad
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "'z2'", "nan or inf", "[3]")


def test_zero_row(run_cli, tmp_path):
    z1, z2 = _good()
    z1[2] = 0
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2)
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "all-zero rows", "[2]")


def test_labels_wrong_length(run_cli, tmp_path):
    z1, z2 = _good()
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2, labels=np.arange(4))
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "'labels'", "(4,)", "(5,)")


def test_labels_not_integers(run_cli, tmp_path):
    z1, z2 = _good()
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2, labels=np.linspace(0, 1, 5))
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", path, "--out", out), out, "not whole numbers")


@pytest.mark.parametrize("n_ref", ["1", "0", "-5"])
def test_n_ref_too_small(run_cli, pairs_file, tmp_path, n_ref):
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", pairs_file, "--out", out, "--n-ref", n_ref),
        out,
        f"--n-ref {n_ref} must be at least 2",
        "the threshold -1/(n_ref - 1)",
    )


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_negative_seed(run_cli, pairs_file, tmp_path, mode):
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", pairs_file, "--out", out, "--seed", "-1", "--pairs", mode),
        out,
        "--seed -1 must be in [0, 2^63 - 1]",
        "what numpy and torch generators take",
    )


def test_out_under_a_file(run_cli, pairs_file, tmp_path):
    (tmp_path / "taken").write_text("keep me")
    result = run_cli("analyze", pairs_file, "--out", tmp_path / "taken" / "sub")
    assert result.code == 2 and "Traceback" not in result.err
    assert "which is a file, not a folder" in " ".join(result.err.split())
    assert (tmp_path / "taken").read_text() == "keep me"


def test_staging_folder_that_cannot_be_created(run_cli, pairs_file, tmp_path, monkeypatch):
    # os.access can say yes where mkdir still fails (root on a read-only mount, /proc): a message,
    # not a traceback
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", pairs_file, "--out", out),
        out,
        "Cannot write to",
        "Read-only file system",
    )


def test_unknown_pairs_mode(run_cli, pairs_file, tmp_path):
    out = tmp_path / "out"
    _assert_refused(run_cli("analyze", pairs_file, "--out", out, "--pairs", "some"), out, "--pairs")


def test_unknown_option(run_cli, pairs_file, tmp_path):
    out = tmp_path / "out"
    result = run_cli("analyze", pairs_file, "--out", out, "--frobnicate")
    assert result.code == 2 and "Traceback" not in result.err
    assert "--frobnicate" in result.err
    assert not out.exists()


def test_out_is_a_file(run_cli, pairs_file, tmp_path):
    out = tmp_path / "taken"
    out.write_text("keep me")
    result = run_cli("analyze", pairs_file, "--out", out)
    assert result.code == 2 and "not a folder" in " ".join(result.err.split())
    assert out.read_text() == "keep me"


def test_failure_leaves_existing_out_untouched(run_cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("previous")
    z1, z2 = _good()
    z1[0, 0] = np.nan
    path = _save_npz(tmp_path / "pairs.npz", z1=z1, z2=z2)
    result = run_cli("analyze", path, "--out", out)
    assert result.code == 2
    assert (out / "result.json").read_text() == "previous"
    assert sorted(p.name for p in out.iterdir()) == ["result.json"]


def test_help_lists_every_command_with_an_example(run_cli):
    result = run_cli("--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    for command in ("analyze", "train", "compare", "sweep", "synth"):
        assert f"cl-diag {command} " in text, command


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--seed", "-1"], "--seed -1 must be in [0, 2^63 - 1]"),
        (["--spread", "nan"], "--spread nan must be a finite number"),
        (["--view-noise", "inf"], "--view-noise inf must be a finite number"),
        (["--view-noise", "-1"], "--view-noise -1.0 must be at least 0"),
        (["--classes", "20"], "--classes 20 is more than the --n 10 instances"),
    ],
)
def test_synth_bad_options(run_cli, tmp_path, args, fragment):
    out = tmp_path / "s.npz"
    result = run_cli("synth", out, "--n", "10", *args)
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    assert fragment in " ".join(result.err.split())
    assert list(tmp_path.iterdir()) == []


def test_missing_probe_suite_is_named_as_such(run_cli, pairs_file, tmp_path):
    out = tmp_path / "out"
    _assert_refused(
        run_cli("analyze", pairs_file, "--out", out, "--probe", tmp_path / "none.toml"),
        out,
        "probe suite",
        "(see probes/)",
    )
