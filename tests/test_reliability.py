"""Hostile and broken inputs (issue 11): every case ends with exit 2 and a message naming the
problem and the fix, no traceback, nothing written outside ``--out``, and the previous good
output intact. One test (or parametrized group) per case of the issue, written from its
reproduction. The property-based suite is in test_reliability_fuzz.py, interrupts in
test_reliability_signals.py, the memory cap in test_reliability_memory.py."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import refused

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"


# --------------------------------------------------------------------------- helpers


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: file bytes, or "dir" / "link"."""
    out: dict[str, bytes | str] = {}
    for path in sorted(Path(folder).rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[key] = "link"
        elif path.is_dir():
            out[key] = "dir"
        else:
            out[key] = path.read_bytes()
    return out


def embeddings(path: Path, n: int = 40, d: int = 6, seed: int = 0, **extra) -> Path:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d)).astype(np.float32)
    z2 = (z1 + 0.3 * rng.standard_normal((n, d))).astype(np.float32)
    np.savez(path, z1=z1, z2=z2, labels=np.arange(n) % 3, **extra)
    return path


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    """A complete toy run (last.pt, metrics.csv), trained in process."""
    from cl_diag.cli import main

    out = tmp_path_factory.mktemp("toy") / "run"
    with pytest.raises(SystemExit) as done:
        main(["train", str(TOY), "--steps", "6", "--out", str(out), "--quiet"])
    assert done.value.code in (0, None)
    return out


def _crafted(source: Path, target: Path, change) -> Path:
    ck = torch.load(source, weights_only=True)
    change(ck)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ck, target)
    return target


# --------------------------------------------------------------------------- 2. grid values


@pytest.mark.slow
def test_grid_values_never_name_a_path_outside_out(run_cli, tmp_path):
    jail = tmp_path / "jail"
    out = jail / "sweep"
    jail.mkdir()
    hostile = "../../../../x,a/b_c=d"
    result = run_cli(
        "sweep", TOY, "--grid", f"data-root={hostile}", "--steps", "2", "--out", out, "--quiet"
    )
    assert result.code == 0, result.err
    # everything the sweep wrote is under --out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jail"]
    assert sorted(p.name for p in jail.iterdir()) == ["sweep"]
    cells = sorted(p.name for p in out.iterdir() if p.name != "comparison")
    assert cells == ["data-root=..%2F..%2F..%2F..%2Fx", "data-root=a%2Fb%5Fc%3Dd"]
    for cell in cells:
        assert (out / cell / "analysis" / "result.json").is_file()


def test_a_long_grid_value_gets_a_short_hashed_folder(run_cli, tmp_path):
    from cl_diag.orchestration.sweep import Cell

    long = Cell((("data_root", "x" * 400),))
    other = Cell((("data_root", "x" * 399 + "y"),))
    assert len(long.name) == 200 and long.name != other.name and "/" not in long.name


# --------------------------------------------------------------------------- 3. ownership


def test_a_planted_ownership_listing_deletes_nothing(run_cli, tmp_path):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "thesis.tex").write_text("my thesis")
    (out / "data.csv").write_text("1,2\n")
    (out / ".cl-diag-owned").write_text("thesis.tex\ndata.csv\n")
    result = run_cli("analyze", embeddings(tmp_path / "a.npz"), "--out", out, "-q")
    assert result.code == 0, result.err
    assert (out / "thesis.tex").read_text() == "my thesis"
    assert (out / "data.csv").read_text() == "1,2\n"
    # a listing with a hash that does not match the file proves nothing either
    listing = (out / ".cl-diag-owned").read_text()
    fake = hashlib.sha256(b"something else").hexdigest()
    (out / ".cl-diag-owned").write_text(listing + f"{fake}  thesis.tex\n")
    assert run_cli("analyze", tmp_path / "a.npz", "--out", out, "-q").code == 0
    assert (out / "thesis.tex").read_text() == "my thesis"


@pytest.mark.slow
def test_a_users_own_report_is_refused_without_overwrite(run_cli, tmp_path):
    source = embeddings(tmp_path / "a.npz")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    message = refused(run_cli("analyze", source, "--out", out, "-q"), "report.md", "--overwrite")
    assert "did not write" in message
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]
    assert (out / "report.md").read_text() == "my notes"
    # its own earlier output it replaces freely; an edited report is the user's again
    assert run_cli("analyze", source, "--out", out, "-q", "--overwrite").code == 0
    assert run_cli("analyze", source, "--out", out, "-q").code == 0
    (out / "report.md").write_text("edited")
    refused(run_cli("analyze", source, "--out", out, "-q"), "report.md")
    compare_out = tmp_path / "cmp"
    compare_out.mkdir()
    (compare_out / "report.html").write_text("mine")
    refused(run_cli("compare", out, "--out", compare_out), "report.html", "--overwrite")
    assert run_cli("compare", out, "--out", compare_out, "--overwrite").code == 0


# --------------------------------------------------------------------------- 4. atomic as a set


@pytest.mark.slow
def test_a_folder_in_the_way_changes_nothing(run_cli, tmp_path):
    out = tmp_path / "out"
    assert run_cli("analyze", embeddings(tmp_path / "a.npz"), "--out", out, "-q").code == 0
    (out / "spectrum_embedding.svg").unlink()
    (out / "spectrum_embedding.svg").mkdir()
    before = snapshot(out)
    other = embeddings(tmp_path / "b.npz", seed=1)
    for flag in ([], ["--overwrite"]):
        result = run_cli("analyze", other, "--out", out, "-q", *flag)
        refused(result, "spectrum_embedding.svg is a folder", "Nothing was written")
        assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --------------------------------------------------------------------------- 5. leftovers


def test_leftovers_of_a_killed_run_are_removed_and_announced(run_cli, tmp_path, toy_run):
    from cl_diag.io.output import STAGING_MARKER, STAGING_MARKER_TEXT

    source = embeddings(tmp_path / "a.npz")
    out = tmp_path / "out"

    def staging(name: str, *, marked: bool = True) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "report.md").write_text("half")
        if marked:
            (folder / STAGING_MARKER).write_text(STAGING_MARKER_TEXT)
        return folder

    dead = staging(".cl-diag-staging-999999999-abcdefgh")  # no such process
    untagged = staging(".cl-diag-staging-k2j4h5g6")  # a name without a pid
    alive = staging(f".cl-diag-staging-{os.getpid()}-abcdefgh")  # a live run's: kept
    # issue 26: a user's folders of a staging folder's name, without cl-diag's marker, stay
    users = staging(".cl-diag-staging-999999998-abcdefgh", marked=False)
    older = staging(".out.staging-999999999-abcdefgh", marked=False)
    result = run_cli("analyze", source, "--out", out, "-q")
    assert result.code == 0, result.err
    assert not dead.exists() and not untagged.exists() and alive.exists()
    assert (users / "report.md").read_text() == "half" and (older / "report.md").exists()
    notes = " ".join(result.err.split())
    assert f"note: removed {dead}" in notes and "staging folder" in notes
    assert str(users) not in notes

    # a training run's temporary files, and --overwrite's replaced epoch checkpoints
    run = tmp_path / "run"
    common = ["train", TOY, "--steps", "8", "--out", run, "--quiet"]
    assert run_cli(*common, "--save-every", "1").code == 0
    assert len(list(run.glob("epoch_*.pt"))) == 4
    (run / ".last.pt.999999999-abcdefgh.tmp").write_bytes(b"")
    (run / ".metrics.csv.zyxwvuts.tmp").write_bytes(b"half")
    (run / "notes.txt").write_text("mine")
    result = run_cli(*common, "--overwrite")
    assert result.code == 0, result.err
    assert sorted(p.name for p in run.iterdir()) == [
        "last.pt",
        "metrics.csv",
        "notes.txt",
        "training_curves.svg",
    ]
    notes = " ".join(result.err.split())
    assert "removed" in notes and "4 epoch checkpoint(s)" in notes and ".last.pt." in notes


# --------------------------------------------------------------------------- 6, 7. bounds


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--pairs", "sampled", "--num-pairs", "10000000000"], "use --pairs exact"),
        (["--hist-bins", "1000000000"], "--hist-bins 1000000000 must be in [1, 1048576]"),
        (
            ["--pairs", "sampled", "--seed", str(2**64 + 1)],
            f"--seed {2**64 + 1} must be in [0, 2^63 - 1]",
        ),
        (["--block-size", "100000000"], "--block-size 100000000 must be in [1, 8192]"),
        (["--workers", "100000"], "--workers 100000 must be in [0, 64]"),
    ],
)
def test_absurd_analyze_options_are_refused_before_any_work(run_cli, tmp_path, args, fragment):
    out = tmp_path / "out"
    refused(run_cli("analyze", embeddings(tmp_path / "a.npz"), "--out", out, *args), fragment)
    assert not out.exists()


def test_sampled_mode_streams_beyond_its_chunk():
    from cl_diag.measurement import pairs

    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((30, 4)).astype(np.float32)
    z2 = z1 + 0.1 * rng.standard_normal((30, 4)).astype(np.float32)
    labels = np.arange(30) % 2
    k = pairs.SAMPLE_CHUNK + 5  # two chunks
    stats = pairs.pair_statistics(z1, z2, labels=labels, mode="sampled", num_pairs=k, seed=1)
    for kind, block in stats.items():
        assert block.count == k and block.estimate is True, kind
        assert sum(block.histogram.counts) == k
        assert -1.0 <= block.min <= block.mean <= block.max <= 1.0
        assert 0 < block.quantile_error < 1e-4  # from the fine histogram
    cross = stats["cross_view_negative"]
    split = cross.by_class
    assert split.same_class.count + split.different_class.count == k
    # about 14/29 of the ordered pairs i != j share a class
    assert abs(split.same_class.count / k - 14 / 29) < 0.01
    # the sample's mean agrees with exact mode's to its standard error
    exact = pairs.pair_statistics(z1, z2, labels=labels)["cross_view_negative"]
    assert abs(cross.mean - exact.mean) < 5 * (exact.var / k) ** 0.5


@pytest.mark.parametrize(
    "key, value, fragment",
    [
        (
            "projector_hidden",
            10**12,
            "config.projector_hidden = 1000000000000 must be in [1, 65536]",
        ),
        ("image_size", 10**6, "config.image_size = 1000000 must be in [1, 1024]"),
        ("projector_dim", 2.5, "config.projector_dim = 2.5 must be a whole number"),
    ],
)
def test_sizes_a_checkpoint_declares_are_bounded(
    run_cli, make_checkpoint, tmp_path, key, value, fragment
):
    good = make_checkpoint(tmp_path / "good.pt", dataset="digits")
    bad = _crafted(good, tmp_path / "bad.pt", lambda ck: ck["config"].__setitem__(key, value))
    refused(run_cli("analyze", bad, "--out", tmp_path / "out"), fragment, "damaged")
    assert not (tmp_path / "out").exists()


def test_train_size_options_are_bounded(run_cli, tmp_path):
    out = tmp_path / "run"
    refused(run_cli("train", "--projector-hidden", str(10**12), "--out", out), "[1, 65536]")
    refused(run_cli("train", TOY, "--num-samples", "100000000", "--out", out), "--num-samples")
    refused(run_cli("train", "--seed", str(2**63), "--out", out), "--seed")
    assert not out.exists()


def test_a_decompression_bomb_is_refused_before_it_expands(run_cli, tmp_path):
    bomb = tmp_path / "bomb.npz"
    zeros = np.zeros((40_000, 300), np.float32)  # 48 MB each, about 100 KB compressed
    np.savez_compressed(bomb, z1=zeros, z2=zeros)
    assert bomb.stat().st_size < 300_000
    refused(run_cli("analyze", bomb, "--out", tmp_path / "out"), "decompression bomb")
    # a torch zip archive that declares far more than it holds is refused the same way
    import zipfile

    fat = tmp_path / "fat.pt"
    torch.save({"z1": torch.zeros(2, 2), "z2": torch.zeros(2, 2)}, fat)
    with zipfile.ZipFile(fat, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fat/extra", b"\0" * 100_000_000)
    refused(run_cli("analyze", fat, "--out", tmp_path / "out"), "decompression bomb")


def test_compare_reads_only_regular_files(run_cli, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero")):
        refused(run_cli("compare", source, "--out", tmp_path / "cmp"), "not a regular file")
    assert not (tmp_path / "cmp").exists()


# --------------------------------------------------------------------------- 8. images


@pytest.fixture
def image_folder(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for label in ("cat", "dog"):
            folder = tmp_path / "imgs" / split / label
            folder.mkdir(parents=True)
            for i in range(4):
                pixels = rng.integers(0, 255, (10, 10, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    return tmp_path / "imgs"


def _bad_image(kind: str, folder: Path) -> Path:
    from PIL import Image

    if kind == "corrupt":
        path = folder / "corrupt.png"
        path.write_bytes(b"this is not an image")
    elif kind == "truncated":
        path = folder / "truncated.png"
        data = (folder / "0.png").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:  # 200 megapixels of 1-bit zeros: a 24 KB file that would decode to gigabytes
        path = folder / "bomb.png"
        Image.new("1", (20_000, 10_000)).save(path)
    return path


@pytest.mark.parametrize("kind", ["corrupt", "truncated", "bomb"])
def test_a_bad_image_stops_training_naming_the_file(run_cli, tmp_path, image_folder, kind):
    bad = _bad_image(kind, image_folder / "train" / "dog")
    out = tmp_path / "runs" / "im"
    result = run_cli(
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        image_folder / "train",
        "--arch",
        "small-cnn",
        "--image-size",
        "8",
        "--batch-size",
        "3",
        "--steps",
        "3",
        "--out",
        out,
        "--quiet",
    )
    refused(result, f"Cannot read the image {bad}", "Remove or replace that file")
    assert not (tmp_path / "runs").exists()  # no empty run folder left behind


def test_a_bad_validation_image_stops_analyze_naming_the_file(run_cli, tmp_path, image_folder):
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        image_folder / "train",
        "--val-root",
        image_folder / "val",
        "--arch",
        "small-cnn",
        "--image-size",
        "8",
        "--batch-size",
        "4",
        "--steps",
        "2",
        "--out",
        run,
        "--quiet",
    )
    assert result.code == 0, result.err
    bad = _bad_image("corrupt", image_folder / "val" / "cat")
    out = tmp_path / "analysis"
    refused(
        run_cli("analyze", run / "last.pt", "--out", out, "--quiet"), f"Cannot read the image {bad}"
    )
    assert not out.exists()


# --------------------------------------------------------------------------- 9. probes


@pytest.mark.slow
@pytest.mark.parametrize(
    "train_images, skipped",
    [
        ("2", {"linear": "single class", "knn": "single class"}),
        ("5", {"linear": "validation"}),
        ("10", {"linear": "validation"}),
        ("20", {"linear": "validation"}),
    ],
)
def test_probes_that_cannot_run_are_skipped_with_their_reason(
    run_cli, make_checkpoint, tmp_path, train_images, skipped
):
    source = make_checkpoint(tmp_path / "last.pt", dataset="digits")
    out = tmp_path / "out"
    result = run_cli(
        "analyze",
        source,
        "--out",
        out,
        "--num-images",
        "40",
        "--probe-train-images",
        train_images,
        "--probe-test-images",
        "30",
        "--no-baselines",
        "--layers",
        "backbone",
    )
    assert result.code == 0, result.err
    probes = json.loads((out / "result.json").read_text())["probes"]
    assert set(probes["skipped"]) == set(skipped)
    for probe, fragment in skipped.items():
        assert fragment in probes["skipped"][probe]
        assert probes.get(probe) is None
    assert probes["clustering"]["nmi"] is not None  # the probes that can run still ran
    report = (out / "report.md").read_text(encoding="utf-8")
    for probe in skipped:
        assert f"The {probe} probe was not run:" in report


@pytest.mark.slow
@pytest.mark.parametrize(
    "classes, per_class, skipped",
    [
        (["cat"], 8, {"linear": "single class", "knn": "single class", "clustering": "single"}),
        (["cat", "dog"], 4, {"linear": "validation"}),  # 8 images in all
    ],
)
def test_an_imagefolder_too_small_for_a_probe_skips_it(
    run_cli, tmp_path, classes, per_class, skipped
):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", max(2, per_class // 2))):
        for label in classes:
            folder = tmp_path / "imgs" / split / label
            folder.mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 255, (10, 10, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    run = tmp_path / "run"
    trained = run_cli(
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        tmp_path / "imgs" / "train",
        "--val-root",
        tmp_path / "imgs" / "val",
        "--arch",
        "small-cnn",
        "--image-size",
        "8",
        "--batch-size",
        "4",
        "--steps",
        "2",
        "--out",
        run,
        "--quiet",
    )
    assert trained.code == 0, trained.err
    out = tmp_path / "out"
    result = run_cli("analyze", run / "last.pt", "--out", out, "-q")
    assert result.code == 0, result.err
    probes = json.loads((out / "result.json").read_text())["probes"]
    assert set(probes["skipped"]) == set(skipped)
    for probe, fragment in skipped.items():
        assert fragment in probes["skipped"][probe] and probes.get(probe) is None
    assert probes["retrieval"] is not None  # what can run still ran


# --------------------------------------------------------------------------- 10. tensors


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda z: {"z1": z.to_sparse(), "z2": z}, "'z1' in {p} is a sparse tensor"),
        (lambda z: {"z1": z, "z2": z.to_sparse_csr()}, "'z2' in {p} is a sparse tensor"),
        (lambda z: {"z1": torch.empty(9, 3, device="meta"), "z2": z}, "is a meta tensor"),
        (
            lambda z: {"z1": torch.quantize_per_tensor(z, 0.1, 0, torch.qint8), "z2": z},
            "is a quantized tensor",
        ),
        (
            lambda z: {"z1": z, "z2": z, "labels": torch.arange(9).to_sparse()},
            "'labels' in {p} is a sparse tensor",
        ),
    ],
)
def test_non_dense_tensors_are_named(run_cli, tmp_path, make, fragment):
    path = tmp_path / "e.pt"
    with warnings.catch_warnings():  # CSR and quantized tensors warn that they are beta
        warnings.simplefilter("ignore")
        torch.save(make(torch.randn(9, 3)), path)
    refused(run_cli("analyze", path, "--out", tmp_path / "out"), fragment.format(p=path))


@pytest.mark.slow
def test_files_are_read_by_content_not_by_name(run_cli, tmp_path):
    npz = embeddings(tmp_path / "a.npz")
    renamed = tmp_path / "x.pt"
    renamed.write_bytes(npz.read_bytes())
    assert run_cli("analyze", renamed, "--out", tmp_path / "o1", "-q").code == 0
    text = tmp_path / "notes.npz"
    text.write_text("just text\n")
    message = refused(run_cli("analyze", text, "--out", tmp_path / "o2"), "not a .npz archive")
    assert "pickled" not in message
    objects = tmp_path / "objects.npz"
    np.savez(objects, z1=np.array([{"a": 1}], dtype=object), z2=np.zeros((1, 1)))
    refused(run_cli("analyze", objects, "--out", tmp_path / "o3"), "holds Python objects")


def test_labels_beyond_int64_stay_apart(run_cli, tmp_path):
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((20, 4)).astype(np.float32)
    for name, labels in (
        ("float", np.array([1e19, 2e19] * 10)),
        ("uint64", np.array([2**63 + 1, 2**64 - 1] * 10, dtype=np.uint64)),
    ):
        path = tmp_path / f"{name}.npz"
        np.savez(path, z1=z1, z2=z1 + 0.1, labels=labels)
        out = tmp_path / name
        assert run_cli("analyze", path, "--out", out, "-q").code == 0
        result = json.loads((out / "result.json").read_text())
        split = result["layers"]["embedding"]["pairs"]["cross_view_negative"]["by_class"]
        # two classes of 10: 2 x 10 x 9 same-class ordered pairs, 2 x 10 x 10 different-class
        assert (split["same_class"]["count"], split["different_class"]["count"]) == (180, 200)


# --------------------------------------------------------------------------- 11. checkpoints


def _set(path: str, value):
    def change(ck):
        *parents, key = path.split(".")
        node = ck
        for part in parents:
            node = node[part]
        node[key] = value

    return change


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_set("n_train", "abc"), "'n_train' must be a whole number"),
        (_set("config", [1, 2]), "'config' must be a dict"),
        (_set("step", "x"), "'step' must be a whole number"),
        (_set("backbone", 5), "'backbone' must be a dict"),
        (_set("embeddings.z1", "x"), "'embeddings.z1' must be a tensor"),
        (_set("embeddings.z2", torch.zeros(3, 3)), "'embeddings' holds views of different shapes"),
        (_set("config.dataset", 7), "config.dataset = 7 must be a string"),
    ],
)
def test_a_damaged_checkpoint_is_named_on_load(run_cli, tmp_path, toy_run, change, fragment):
    bad = _crafted(toy_run / "last.pt", tmp_path / "bad.pt", change)
    out = tmp_path / "out"
    refused(run_cli("analyze", bad, "--out", out), fragment, "damaged cl-diag checkpoint")
    assert not out.exists()


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_set("optimizer.param_groups", []), "'optimizer.param_groups'"),
        (_set("rng", {}), "'rng.torch'"),
        (_set("step", "x"), "'step' must be a whole number"),
        (_set("config.epochs", "many"), "config.epochs = 'many' must be a whole number"),
        (_set("metrics", "m"), "'metrics' must be a list"),
        (_set("rng.torch", torch.zeros(3, dtype=torch.uint8)), "random generator states"),
        (_set("optimizer.param_groups", [{"params": [0, 1, 2]}]), "optimizer state"),
    ],
)
def test_a_damaged_checkpoint_is_not_resumed(run_cli, tmp_path, toy_run, change, fragment):
    def incomplete(ck):
        ck["complete"] = False
        ck["config"]["steps"] = 12
        ck["scheduler"]["total_steps"] = 12
        change(ck)

    bad = _crafted(toy_run / "last.pt", tmp_path / "run" / "last.pt", incomplete)
    before = snapshot(tmp_path / "run")
    refused(run_cli("train", "--resume", bad, "--quiet"), fragment)
    assert snapshot(tmp_path / "run") == before


# --------------------------------------------------------------------------- 12. full disk

_FULL_DISK = """
import resource, signal, sys
from cl_diag.cli import main

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
codes = []
for command in sys.argv[1:]:
    limit, *args = command.split("|")
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), resource.RLIM_INFINITY))
    try:
        main(args)
    except SystemExit as exc:
        codes.append(exc.code)
print("codes", codes)
"""


@pytest.mark.slow
def test_a_full_disk_is_a_message_and_the_old_output_survives(run_cli, tmp_path, toy_run):
    out = tmp_path / "analysis"
    assert run_cli("analyze", embeddings(tmp_path / "a.npz", n=200), "--out", out, "-q").code == 0
    run = tmp_path / "run"
    assert run_cli("train", TOY, "--steps", "4", "--out", run, "--quiet").code == 0
    before = {"analysis": snapshot(out), "run": snapshot(run)}
    other = embeddings(tmp_path / "b.npz", n=200, seed=1)
    commands = [  # file-size limits below report.html's and last.pt's sizes
        f"20000|analyze|{other}|--out|{out}|-q",
        f"8000|train|{TOY}|--steps|6|--out|{run}|--quiet|--overwrite",
    ]
    child = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, *commands],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert "codes [2, 2]" in child.stdout, (child.stdout, child.stderr[-3000:])
    assert "Traceback" not in child.stderr
    err = " ".join(child.stderr.split())
    assert f"Cannot write the outputs for --out {out}: File too large" in err
    assert f"nothing in --out {out} was changed" in err
    assert f"Cannot write {run / 'last.pt'}: File too large" in err
    assert snapshot(out) == before["analysis"]
    # the run's last.pt and metrics.csv keep their content; only --overwrite's note differs
    assert snapshot(run) == before["run"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --------------------------------------------------------------------------- 13. pickled code


def test_pickled_code_is_refused_by_every_command(run_cli, tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    evil = tmp_path / "last.pt"
    torch.save({"format": "cl-diag/checkpoint", "x": Payload()}, evil)
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"z1": Payload()}, protocol=4))
    for result in (
        run_cli("analyze", evil, "--out", tmp_path / "o"),
        run_cli("analyze", raw, "--out", tmp_path / "o"),
        run_cli("train", "--resume", evil),
    ):
        refused(result, "carries pickled code and was refused", "io.open")
    assert not marker.exists()


# --------------------------------------------------------------------------- smaller


def test_spectrum_and_effective_rank_do_not_depend_on_the_thread_count():
    from cl_diag.measurement.geometry import geometry

    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((1500, 96)).astype(np.float32)
    z2 = z1 + 0.5 * rng.standard_normal((1500, 96)).astype(np.float32)
    threads = torch.get_num_threads()
    try:
        results = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(geometry(z1, z2, n_ref=1500))
    finally:
        torch.set_num_threads(threads)
    assert results[0] == results[1] == results[2]


def test_synth_keeps_an_existing_file_and_bounds_its_size(run_cli, tmp_path):
    out = tmp_path / "s.npz"
    assert run_cli("synth", out, "--n", "10", "--d", "2").code == 0
    before = out.read_bytes()
    refused(run_cli("synth", out, "--n", "12"), "already exists", "--overwrite")
    assert out.read_bytes() == before
    assert run_cli("synth", out, "--n", "12", "--overwrite").code == 0
    assert out.read_bytes() != before
    refused(
        run_cli("synth", tmp_path / "big.npz", "--n", str(10**10)), "--n 10000000000 must be in"
    )
    refused(
        run_cli("synth", tmp_path / "big.npz", "--n", str(1 << 20), "--d", "1024"),
        "lower --n to 131,072 or less",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz"]


def test_sweep_checks_every_cells_analysis_before_training(run_cli, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text("hist-bins = 0\n")
    out = tmp_path / "sweep"
    result = run_cli("sweep", TOY, "--grid", "seed=1,2", "--probe", suite, "--out", out)
    refused(
        result, "Sweep cell seed=1", "--hist-bins 0 must be in [1, 1048576]", "Nothing was trained"
    )
    assert not out.exists()


def test_run_files_get_the_permissions_of_analyses(toy_run):
    umask = os.umask(0)
    os.umask(umask)
    for name in ("last.pt", "metrics.csv"):
        assert stat.S_IMODE((toy_run / name).stat().st_mode) == 0o666 & ~umask, name


def test_report_markdown_shows_file_names_as_text(run_cli, tmp_path):
    from markdown_it import MarkdownIt

    folder = tmp_path / "<img src=x onerror=alert(1)>&amp;"
    folder.mkdir()
    source = embeddings(folder / "<script>alert(2).npz")
    out = tmp_path / "out"
    assert run_cli("analyze", source, "--out", out, "-q").code == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "<img" not in text and "<script" not in text and "&lt;img src=x" in text

    def tokens(items):
        for token in items:
            yield token
            yield from tokens(token.children or [])

    parsed = MarkdownIt("commonmark").enable("table").parse(text)
    assert not [t.type for t in tokens(parsed) if "html" in t.type]
    assert "E_{i<j}" in text  # a '<' that starts no tag is left as it is


def test_layers_do_not_offer_none(run_cli, tmp_path):
    source = embeddings(tmp_path / "a.npz")
    result = run_cli("analyze", source, "--layers", "none", "--out", tmp_path / "o")
    refused(result, "--layers 'none': give 'all' or a comma-separated subset")
