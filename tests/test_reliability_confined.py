"""Hostile and broken inputs, round three (issue 35): ``reproduce`` confined to its ``--out`` and
refusing before it writes, output folders no one means, JSON inputs with numbers no writer
makes, damaged recorded commands, and the Python API as strict as the command line.

Each case failed before the change it names: it wrote outside ``--out``, wrote and then
refused, or ended in a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import refused
from test_report import make_result

import cl_diag
from cl_diag.errors import UserError
from cl_diag.io.jsonfile import parse_json
from cl_diag.io.output import ensure_writable_parent


def _analysis(folder: Path, *, train: dict | None = None, analyze: dict | None = None) -> Path:
    """An analysis folder whose result records the commands that made it."""
    d = make_result(n=20)
    d["source"] = {"kind": "checkpoint" if train else "embeddings", "sha256": "0" * 64}
    d["commands"] = {"analyze": analyze or {"input": "x.npz"}, "train": train}
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(d))
    return folder


def _comparison(folder: Path, runs: list[Path], **record: object) -> Path:
    folder.mkdir(parents=True)
    provenance = {"schema": "cl-diag/provenance/1", "inputs": [str(r) for r in runs], **record}
    (folder / "provenance.json").write_text(json.dumps(provenance))
    return folder


# --------------------------------------------------------------------------- reproduce


def test_a_recorded_download_is_refused_before_anything_is_created(tmp_path, run_cli):
    """The issue's case: a tampered result.json whose training downloads CIFAR into a folder
    outside --out. Before, reproduce created that folder and started the download."""
    elsewhere = tmp_path / "elsewhere" / "T2data"
    train = {"dataset": "cifar10", "download": True, "data_root": str(elsewhere)}
    original = _analysis(tmp_path / "orig", train=train, analyze={"input": "run/last.pt"})
    out = tmp_path / "again"
    result = run_cli("reproduce", original, "--out", out)
    refused(result, "never downloads", "T2data", "is not a folder here")
    assert not elsewhere.exists() and not elsewhere.parent.exists() and not out.exists()


def test_a_recorded_data_root_is_read_never_created(tmp_path, run_cli):
    missing = tmp_path / "nowhere" / "data"
    train = {"dataset": "cifar10", "data_root": str(missing)}
    original = _analysis(tmp_path / "orig", train=train, analyze={"input": "run/last.pt"})
    out = tmp_path / "again"
    refused(run_cli("reproduce", original, "--out", out), "not a folder here", "nowhere")
    assert not missing.parent.exists() and not out.exists()
    # the analysis's own data root too
    analyze = {"input": "run/last.pt", "data_root": str(missing)}
    original = _analysis(tmp_path / "orig2", train={"dataset": "digits"}, analyze=analyze)
    refused(run_cli("reproduce", original, "--out", out), "analysis's data_root")
    assert not out.exists()


def test_a_users_file_in_out_is_refused_before_the_first_run(tmp_path, run_cli):
    """Before, reproduce re-ran every run, wrote their folders into --out, then refused."""
    original = _analysis(tmp_path / "orig")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "reproduction.md").write_text("my notes\n")
    refused(run_cli("reproduce", original, "--out", out), "reproduction.md")
    assert sorted(p.name for p in out.iterdir()) == ["reproduction.md"]
    assert (out / "reproduction.md").read_text() == "my notes\n"


@pytest.mark.parametrize(
    ("recorded", "fragment"),
    [
        ({"input": 5}, "input = 5 is not a path"),
        ({"input": "x.npz", "layers": 5}, "layers = 5 is not a list of names"),
        ({"input": "x.npz", "probes": "linear"}, "probes = 'linear' is not a list of names"),
    ],
)
def test_damaged_recorded_analyses_are_refused_with_one_line(tmp_path, run_cli, recorded, fragment):
    original = _analysis(tmp_path / "orig", analyze=recorded)
    out = tmp_path / "again"
    refused(run_cli("reproduce", original, "--out", out), fragment)
    assert not out.exists()


@pytest.mark.parametrize(
    ("baseline", "fragment"),
    [("not-an-input", "baseline that is not one of its inputs"), (5, "baseline that is not")],
)
def test_a_provenance_baseline_outside_the_inputs_is_refused_before_any_run(
    tmp_path, run_cli, baseline, fragment
):
    runs = [_analysis(tmp_path / "a" / "analysis"), _analysis(tmp_path / "b" / "analysis")]
    comparison = _comparison(tmp_path / "cmp", runs, baseline=baseline)
    out = tmp_path / "again"
    refused(run_cli("reproduce", comparison, "--out", out), fragment)
    assert not out.exists()


def test_a_provenance_nested_beyond_any_record_is_refused(tmp_path, run_cli):
    folder = tmp_path / "cmp"
    folder.mkdir()
    (folder / "provenance.json").write_text("[" * 200_000 + "]" * 200_000)
    refused(run_cli("reproduce", folder, "--out", tmp_path / "again"), "levels deep")


# --------------------------------------------------------------------------- JSON numbers


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"n": ' + "7" * 5_001 + "}", "an integer of 5,001 digits"),
        ('{"n": -' + "7" * 41 + "}", "an integer of 41 digits"),
        ('{"mean": NaN}', "the non-finite literal NaN"),
        ('{"mean": -Infinity}', "the non-finite literal -Infinity"),
    ],
)
def test_json_numbers_no_writer_makes_are_refused(text, fragment):
    with pytest.raises(UserError, match=fragment):
        parse_json(text, where="f.json", fix="Fix it.")
    assert parse_json('{"n": ' + "7" * 40 + "}", where="f", fix="")["n"] == int("7" * 40)
    assert parse_json('{"x": NaN}', where="f", fix="", finite=False)["x"] != 0


@pytest.mark.parametrize(
    ("literal", "fragment"), [("9" * 5_001, "5,001 digits"), ("NaN", "non-finite literal NaN")]
)
def test_compare_refuses_a_result_with_such_a_number(tmp_path, run_cli, literal, fragment):
    """Before: a ValueError traceback for the integer, and a silent exit 0 for the NaN."""
    good = tmp_path / "good"
    good.mkdir()
    (good / "result.json").write_text(json.dumps(make_result(n=20)))
    bad = tmp_path / "bad"
    bad.mkdir()
    text = json.dumps(make_result(n=20)).replace('"seed": 0', f'"seed": {literal}', 1)
    assert literal in text
    (bad / "result.json").write_text(text)
    out = tmp_path / "cmp"
    refused(run_cli("compare", good, bad, "--out", out), fragment)
    assert not out.exists()


# --------------------------------------------------------------------------- output folders


@pytest.mark.parametrize(
    "where", ["/", "/etc", "/usr/share/cl-diag", "/proc/self", "/tmp", "/var", "/home"]
)
def test_folders_no_one_means_are_refused_as_output(where):
    with pytest.raises(UserError, match=r"--out .* is (the top|a system folder)"):
        ensure_writable_parent(Path(where))


def test_the_home_folder_and_cl_diags_source_are_refused(
    tmp_path, monkeypatch, run_cli, pairs_file
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    refused(run_cli("analyze", pairs_file, "--out", home, "-q"), "your home folder itself")
    assert list(home.iterdir()) == []
    assert (home / "analysis").parent == home  # a folder below it is fine
    assert run_cli("analyze", pairs_file, "--out", home / "analysis", "-q").code == 0
    package = Path(cl_diag.__file__).parent
    for source in (package, package / "report"):
        with pytest.raises(UserError, match="cl-diag's own source code"):
            ensure_writable_parent(source)


# --------------------------------------------------------------------------- the API


@pytest.mark.slow
def test_the_api_refuses_an_expanded_tensor_under_a_memory_cap(capped_cli):
    """The issue's case: 10^8 x 16 ones expanded from one row (6.4 GB as float32). Before, the
    API tried to allocate it; the cap (what the process holds + 1 GiB) would end that in a
    MemoryError traceback. Now a UserError names the view before anything is allocated."""
    code = (
        "import torch, cl_diag\n"
        "z = torch.ones(1, 16).expand(10**8, 16)\n"
        "try:\n"
        "    cl_diag.measure({'z1': z, 'z2': z})\n"
        "except cl_diag.UserError as exc:\n"
        "    print('refused:', exc)\n"
    )
    child = capped_cli([], 1 << 30, code)
    assert "Traceback" not in child.stderr, child.stderr[-2000:]
    assert "refused: 'z1'" in child.stdout and "is an expanded view" in child.stdout


def test_the_api_refuses_a_broadcast_numpy_array_and_keeps_a_small_one():
    import numpy as np

    wide = np.broadcast_to(np.ones((1, 16), np.float32), (10**7, 16))
    with pytest.raises(UserError, match="expanded view"):
        cl_diag.measure(wide, wide)
    small = torch.ones(1, 8).expand(50, 8)  # 1.6 kB as float32: measured as it is
    assert cl_diag.measure(small, small + 0.5 * torch.randn(50, 8)).n_ref == 50


@pytest.mark.parametrize("given", ["ckpt.pt", Path("ckpt.pt"), 5])
def test_the_api_names_a_path_given_where_the_encoder_goes(tmp_path, given):
    """Before: a TypeError from deep inside (a str has no .eval)."""
    with pytest.raises(UserError, match=r"encoder must be a torch\.nn\.Module"):
        cl_diag.analyze(given, dataset="digits", out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    if isinstance(given, (str, os.PathLike)):
        with pytest.raises(UserError, match=r"cl-diag analyze ckpt\.pt"):
            cl_diag.analyze(given, dataset="digits", out=tmp_path / "a")


# --------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda z, tmp: cl_diag.compare([cl_diag.measure(z, z)], out=5), "out=5 is of type int"),
        (lambda z, tmp: cl_diag.load(5), "path=5 is of type int"),
        (lambda z, tmp: cl_diag.load(""), "path='' is empty"),
        (lambda z, tmp: cl_diag.measure(z, z).save(3.5), "path=3.5 is of type float"),
        (
            lambda z, tmp: cl_diag.analyze(
                encoder=torch.nn.Flatten(), dataset="digits", out=tmp, data_root=7
            ),
            "data_root=7 is of type int",
        ),
    ],
)
def test_the_api_names_a_parameter_that_is_no_path(tmp_path, call, fragment):
    """Before: ``TypeError: expected str, bytes or os.PathLike object, not int`` from deep
    inside; now a UserError naming the parameter, and nothing is written."""
    with pytest.raises(UserError, match=r"give a str or pathlib\.Path") as raised:
        call(torch.randn(20, 4), tmp_path / "a")
    assert fragment in str(raised.value)
    assert not (tmp_path / "a").exists()


def test_a_long_value_is_shortened_in_the_message(run_cli, tmp_path):
    """Before: a 100,000-character timm name was echoed in full several times (3 MB of
    stderr). Now the option's declaration bounds a name, and every option message shows a long
    value by its ends and its length."""
    from cl_diag.options import SHOWN, shown

    name = "timm:" + "x" * 100_000
    result = refused(
        run_cli("train", "--arch", name, "--out", tmp_path / "run"), "100,005 characters"
    )
    assert len(result) < 1_000 and "longer than the 256 characters accepted" in result
    assert not (tmp_path / "run").exists()
    assert shown("abc") == "'abc'" and len(shown("y" * 10_000)) < SHOWN + 40
    assert shown(list(range(1000))).endswith(f"({len(repr(list(range(1000)))):,} characters)")
    analyze = refused(run_cli("analyze", tmp_path / "x.npz", "--arch", "a" * 300), "300 char")
    assert len(analyze) < 1_000


def test_a_loop_of_symbolic_links_is_named_as_one(run_cli, tmp_path, pairs_file):
    """Before: "No such file" for an input and "a symbolic link to b, which does not exist" for
    --out, for a loop the user has to untie, not a file to create."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    loop = f"is a loop of symbolic links ({tmp_path / 'a'} -> {tmp_path / 'b'} -> {tmp_path / 'a'})"
    refused(run_cli("analyze", tmp_path / "a", "--out", tmp_path / "o"), loop)
    refused(run_cli("analyze", pairs_file, "--out", tmp_path / "a"), "--out", loop)
    refused(run_cli("compare", tmp_path / "a", "--out", tmp_path / "c"), loop)
    (tmp_path / "d").symlink_to(tmp_path / "nowhere")
    refused(run_cli("analyze", tmp_path / "d"), "is a symbolic link to", "which does not exist")
    refused(run_cli("analyze", tmp_path / "missing.npz"), "missing.npz does not exist")
    assert not (tmp_path / "o").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("analyze", ""), "the source argument is empty. Give a path."),
        (("analyze", "x.npz", "--data-root", ""), "--data-root is empty. Give a path."),
        (("train", "--resume="), "--resume is empty. Give a path."),
        (("train", "--val-root", " "), "--val-root is empty"),
        (("compare", "a", "--out="), "--out is empty. Give the folder to write to"),
    ],
)
def test_an_empty_path_is_named_as_empty(run_cli, tmp_path, monkeypatch, args, fragment):
    """Before: ``cl-diag analyze ""`` said ". is not a file" (pathlib reads "" as the current
    folder) and an empty --data-root or --resume was the current folder; now an empty path is
    refused as empty, before anything runs."""
    monkeypatch.chdir(tmp_path)
    refused(run_cli(*args), fragment)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--hist-bins", "inf"), "--hist-bins inf is not a finite number"),
        (("--seed=nan",), "--seed nan is not a finite number"),
        (("--seed", "1e308"), "--seed 1e308 is not a whole number written in digits"),
        (("--num-images", "2.5"), "--num-images 2.5 is not a whole number written in digits"),
    ],
)
def test_a_number_that_is_no_whole_number_gets_an_error_line(run_cli, pairs_file, args, fragment):
    """Before: click's usage box ("Input should be a valid integer") for --hist-bins inf and
    --seed 1e308, with no ``error:`` line; an empty backbone prefix stays a valid value."""
    refused(run_cli("analyze", pairs_file, *args), fragment, "give a whole number such as")


@pytest.mark.slow
def test_a_marked_copy_named_in_a_planted_listing_survives(run_cli, tmp_path, pairs_file):
    """Before: a copy of an old report (``mine.md``) and a CSV with cl-diag's header row, named
    in a listing planted with their real seals, were deleted as stale files of the previous
    run. Now a file is pruned only when it is the very file cl-diag moved there (it carries
    cl-diag's extended attribute); the figures cl-diag wrote are still pruned."""
    from cl_diag.io.output import OWNED_FILES, seal

    out = tmp_path / "a"
    assert run_cli("analyze", pairs_file, "--out", out).code == 0
    figures = sorted(p.name for p in out.glob("*.svg"))
    assert figures and os.getxattr(out / "report.md", "user.cl-diag.seal")
    (out / "mine.md").write_bytes((out / "report.md").read_bytes())  # the user's copies
    header = "label,run,layer,positive_mean\nsimclr,a,embedding,0.5\n"
    (out / "table.csv").write_text(header)
    with open(out / OWNED_FILES, "a", encoding="utf-8") as listing:
        for name in ("mine.md", "table.csv"):
            listing.write(f"{seal(out / name, name)}  {name}\n")
    before = {name: (out / name).read_bytes() for name in ("mine.md", "table.csv")}
    result = run_cli("analyze", pairs_file, "--out", out)
    assert result.code == 0, result.err
    assert {name: (out / name).read_bytes() for name in before} == before
    assert "kept mine.md from an earlier run" in " ".join(result.err.split())
    # a report cl-diag wrote, renamed by the user and planted under its new name, stays too: the
    # attribute holds the seal of the name it was written as
    (out / "report.md").rename(out / "moved.md")
    with open(out / OWNED_FILES, "a", encoding="utf-8") as listing:
        listing.write(f"{seal(out / 'moved.md', 'moved.md')}  moved.md\n")
    assert run_cli("analyze", pairs_file, "--out", out).code == 0
    assert (out / "moved.md").is_file() and (out / "report.md").is_file()
    assert sorted(p.name for p in out.glob("*.svg")) == figures


# --------------------------------------------------------------------------- concurrency


def test_a_second_train_into_a_folder_a_run_is_writing_is_refused(run_cli, tmp_path):
    """Two ``cl-diag train`` started together into one --out both passed the check for a run
    already there (neither had written last.pt yet) and wrote into each other's files. The run
    folder is now held by the run writing it: the second is refused, and leaves the folder
    alone (before, a refused run removed the folders it had created, under the other run)."""
    from cl_diag.io.output import exclusive_folder

    toy = Path(__file__).resolve().parents[1] / "trainers" / "rebuttal-toy.toml"
    out = tmp_path / "run"
    out.mkdir()
    with exclusive_folder(out, what="cl-diag train"):  # the first run, mid-way
        second = run_cli("train", toy, "--steps", "2", "--out", out, "--quiet")
        refused(second, "is being written by another cl-diag train right now")
        assert out.is_dir() and list(out.iterdir()) == []
    assert run_cli("train", toy, "--steps", "2", "--out", out, "--quiet").code == 0
    assert (out / "last.pt").is_file()


@pytest.mark.slow
def test_two_commands_writing_one_folder_move_their_files_one_after_the_other(
    run_cli, tmp_path, pairs_file, monkeypatch
):
    """An analysis into a folder that another command (a sweep's cell analysis, another
    analyze) is moving its files into waits for that move to end and then moves a whole,
    proven set of its own; before, the two moves interleaved and their listings could name
    each other's files. Past the wait it is refused, and the folder is left as it was."""
    import subprocess
    import sys
    import time

    from cl_diag.io import output
    from cl_diag.io.output import OWNED_FILES, exclusive_folder, read_listing, seal

    out = tmp_path / "cell" / "analysis"
    assert run_cli("analyze", pairs_file, "--out", out, "--pairs", "sampled").code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(output, "COMMIT_WAIT", 0.3)
    with exclusive_folder(out, what="cl-diag command"):  # another command, mid-move
        refused(run_cli("analyze", pairs_file, "--out", out, "-q"), "is being written by another")
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        child = subprocess.Popen(
            [sys.executable, "-m", "cl_diag", "analyze", str(pairs_file), "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.0)
        assert child.poll() is None  # waiting for the move under way
    assert child.wait(timeout=120) == 0, child.stderr.read() if child.stderr else ""
    listing = read_listing(out)
    files = sorted(p.name for p in out.iterdir() if p.name != OWNED_FILES)
    assert sorted(listing.seals) == files
    assert all(seal(out / name, name) in listing.seals[name] for name in files)
    assert json.loads((out / "result.json").read_text())["mode"] == "exact"  # the later one


def test_an_empty_image_is_refused_before_the_first_step(run_cli, tmp_path):
    """Before: a 0-byte image in an image folder stopped training when it was first drawn,
    epochs in, after last.pt was written. Now it is found when the folder is listed."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for label in ("a", "b"):
        (tmp_path / "train" / label).mkdir(parents=True)
        for i in range(4):
            pixels = (rng.random((8, 8, 3)) * 255).astype("uint8")
            Image.fromarray(pixels).save(tmp_path / "train" / label / f"{i}.png")
    (tmp_path / "train" / "b" / "empty.png").write_bytes(b"")
    out = tmp_path / "run"
    result = run_cli(
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        tmp_path / "train",
        "--image-size",
        "8",
        "--batch-size",
        "4",
        "--steps",
        "1",
        "--arch",
        "small-cnn",
        "--out",
        out,
        "--quiet",
    )
    refused(result, "empty.png is an empty file (0 bytes)")
    assert not out.exists()


def test_an_image_declaring_huge_dimensions_is_refused_before_anything_is_written(
    run_cli, tmp_path
):
    """A 400-byte PNG whose header declares 40,000 x 40,000 pixels (1.6 gigapixels, a
    decompression bomb): refused by name, nothing decoded, no run folder made."""
    import struct
    import zlib

    import numpy as np
    from PIL import Image

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rng = np.random.default_rng(0)
    for label in ("a", "b"):
        (tmp_path / "train" / label).mkdir(parents=True)
        for i in range(4):
            pixels = (rng.random((8, 8, 3)) * 255).astype("uint8")
            Image.fromarray(pixels).save(tmp_path / "train" / label / f"{i}.png")
    header = struct.pack(">IIBBBBB", 40_000, 40_000, 8, 0, 0, 0, 0)
    bomb = (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 256))
    )
    (tmp_path / "train" / "b" / "bomb.png").write_bytes(bomb + chunk(b"IEND", b""))
    out = tmp_path / "run"
    result = run_cli(
        "train",
        "--dataset",
        "imagefolder",
        "--data-root",
        tmp_path / "train",
        "--image-size",
        "8",
        "--batch-size",
        "4",
        "--steps",
        "1",
        "--arch",
        "small-cnn",
        "--out",
        out,
        "--quiet",
    )
    refused(result, "bomb.png", "too large to decode safely")
    assert not out.exists()


# --------------------------------------------------------------------------- interrupts


def test_an_interrupt_raised_inside_a_finalizer_is_not_lost(tmp_path):
    """SIGTERM handled while a finalizer ran (seen in a sweep: a WeakKeyDictionary's callback)
    raised Terminated inside it, which Python prints as "Exception ignored ..." and drops: the
    command went on running, and a second SIGTERM within the grace period was ignored as the
    first one's repeat. Now the dropped interrupt is sent again and raised once the finalizer
    has returned, with nothing printed."""
    import subprocess
    import sys

    code = (
        "import os, signal, time\n"
        "from cl_diag.io.signals import Terminated, interrupts\n"
        "class Victim:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        sum(range(10_000))\n"
        "with interrupts():\n"
        "    try:\n"
        "        v = Victim()\n"
        "        del v\n"
        "        time.sleep(2)\n"
        "        print('went on running')\n"
        "    except Terminated:\n"
        "        print('interrupted')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "interrupted", (done.stdout, done.stderr)
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
