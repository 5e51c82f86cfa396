"""Outputs on any file system, and ownership that cannot be planted (issue 26, 1 and 2).

A container volume or a cluster's scratch space is another file system mounted inside the
tree, reached as a mount point or through a symbolic link. ``os.replace`` cannot cross file
systems (``EXDEV``), so cl-diag stages its outputs on ``--out``'s own file system. The tests
mount a tmpfs (as root, which this sandbox and CI are; elsewhere they are skipped with the
reason) and run every command into it, then rerun them after a failure.

Ownership: a listing proves nothing on its own -- not with plain SHA-256 hashes, not even with
the real seals (which anyone can compute): a file is cl-diag's only when it also carries
cl-diag's mark, which every file cl-diag writes begins with and a user's own file does not;
nothing is ever removed through a symbolic link; one folder holds one kind of output; staging
folders carry a marker; no recipe or probe suite chooses where output goes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import refused

from cl_diag.io.output import (
    OWNED_FILES,
    STAGING_MARKER,
    STAGING_MARKER_TEXT,
    carries_mark,
    listing_text,
    seal,
)

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "trainers" / "rebuttal-toy.toml"


def embeddings(path: Path, n: int = 40, d: int = 6, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d)).astype(np.float32)
    np.savez(path, z1=z1, z2=z1 + 0.3 * rng.standard_normal((n, d)).astype(np.float32))
    return path


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }


# --------------------------------------------------------------------------- another disk


@pytest.fixture
def mount(tmp_path) -> Iterator[Callable[[str], Path]]:
    """``mount(name)``: a fresh tmpfs mounted at ``tmp_path/name``, another file system."""
    mounted: list[Path] = []

    def make(name: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(point)],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"cannot mount a tmpfs here ({exc}); a second file system is needed")
        if done.returncode != 0:
            pytest.skip(
                "cannot mount a tmpfs here (mount needs root or CAP_SYS_ADMIN: "
                f"{done.stderr.strip()}); a second file system is needed"
            )
        mounted.append(point)
        assert os.stat(point).st_dev != os.stat(tmp_path).st_dev
        return point

    yield make
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


@pytest.mark.slow
def test_every_command_writes_onto_a_mount_point_and_through_a_link(run_cli, tmp_path, mount):
    """--out a mount point, or a link to another file system: train, analyze, compare and
    sweep end with exit 0 and their outputs in place (they ended in EXDEV tracebacks, leaving
    a listing behind that made every rerun fail the same way)."""
    run, analysis, comparison, sweep = (mount(name) for name in ("run", "a", "c", "s"))
    assert run_cli("train", TOY, "--steps", "4", "--out", run, "--quiet").code == 0
    assert (run / "last.pt").is_file()
    done = run_cli("analyze", run / "last.pt", "--out", analysis, "-q")
    assert done.code == 0, done.err
    assert {"result.json", "report.md", "report.html", OWNED_FILES} <= set(files(analysis))
    done = run_cli("compare", analysis, "--out", comparison, "-q")
    assert done.code == 0, done.err
    assert (comparison / "comparison.csv").is_file()
    done = run_cli("sweep", TOY, "--grid", "vrn=0,3", "--steps", "3", "--out", sweep, "--quiet")
    assert done.code == 0, done.err
    assert (sweep / "comparison" / "report.html").is_file()

    # the same through links: the second run into each folder proves and replaces its files
    links = tmp_path / "links"
    links.mkdir()
    for name, target in (("a", analysis), ("c", comparison), ("s", sweep)):
        (links / name).symlink_to(target)
    before = files(analysis)
    done = run_cli("analyze", run / "last.pt", "--out", links / "a", "-q")
    assert done.code == 0, done.err
    assert files(analysis) == before  # the same bytes, listing included
    assert run_cli("compare", links / "a", "--out", links / "c", "-q").code == 0
    done = run_cli(
        "sweep", TOY, "--grid", "vrn=0,3", "--steps", "3", "--out", links / "s", "--quiet"
    )
    assert done.code == 0, done.err and "skipped 2 complete cell(s)" in done.out
    # nothing was staged beside the links or the mount points
    assert sorted(p.name for p in links.iterdir()) == ["a", "c", "s"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c", "links", "run", "s"]


def test_a_rerun_after_a_failure_on_a_mount_point_succeeds(run_cli, tmp_path, mount):
    """What a killed or refused run leaves on the mount (a staging folder, the listing's
    temporary file, a folder in the way) never stops the next run once it is resolved."""
    source = embeddings(tmp_path / "e.npz")
    out = mount("out")
    assert run_cli("analyze", source, "--out", out, "-q").code == 0
    reference = files(out)
    # a run killed during its moves: its staging folder and the listing's temporary file
    killed = out / ".cl-diag-staging-999999999-abcdefgh"
    (killed / "files").mkdir(parents=True)
    (killed / STAGING_MARKER).write_text(STAGING_MARKER_TEXT)
    (killed / "files" / "report.md").write_text("half")
    (out / f"..cl-diag-owned.999999999-{'k' * 8}.tmp").write_text("half")
    # a refused run: a folder where a file goes
    (out / "report.md").unlink()
    (out / "report.md").mkdir()
    refused(run_cli("analyze", source, "--out", out, "-q"), "is a folder where cl-diag writes")
    (out / "report.md").rmdir()
    done = run_cli("analyze", source, "--out", out, "-q")
    assert done.code == 0, done.err
    assert "removed" in done.err and "staging folder" in done.err
    assert files(out) == reference
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [OWNED_FILES]


# --------------------------------------------------------------------------- ownership


def test_a_planted_listing_with_real_hashes_deletes_nothing(run_cli, tmp_path):
    """A listing of the real SHA-256 of the user's files -- sha256sum's output, under the header
    of cl-diag's earlier listings or of today's -- proves nothing: the user's files stay."""
    mine = {"notes.txt": b"my notes\n", "figure.svg": b"<svg/>\n", "table.csv": b"1,2\n"}
    plain = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in mine.items())
    source = embeddings(tmp_path / "e.npz")
    for index, header in enumerate(
        (
            "# cl-diag: the files it wrote in this folder, as <sha256>  <name>. Do not edit.\n",
            "# cl-diag-owned 2 analysis: the files cl-diag wrote here, as <seal>  <name>. Do "
            "not edit.\n",
        )
    ):
        out = tmp_path / f"notes{index}"
        out.mkdir()
        for name, data in mine.items():
            (out / name).write_bytes(data)
        (out / OWNED_FILES).write_text(header + plain)
        done = run_cli("analyze", source, "--out", out, "-q")
        assert done.code == 0, done.err
        for name, data in mine.items():
            assert (out / name).read_bytes() == data, name
    # nor does it let the user's own report be replaced
    (out / "report.md").write_text("my report")
    listing = (out / OWNED_FILES).read_text()
    digest = hashlib.sha256(b"my report").hexdigest()
    (out / OWNED_FILES).write_text(listing + f"{digest}  report.md\n")
    refused(run_cli("analyze", tmp_path / "e.npz", "--out", out, "-q"), "report.md")
    assert (out / "report.md").read_text() == "my report"


def test_a_planted_listing_with_the_real_seals_deletes_nothing(run_cli, tmp_path):
    """The seal's recipe is public, so a planter can list the *real* seal of each of the user's
    files, under today's header. The files lack cl-diag's mark, so the listing still proves
    nothing: a stale one stays, and one in the way of an output stops the run (exit 2)."""
    source = embeddings(tmp_path / "e.npz")
    made = tmp_path / "made"
    assert run_cli("analyze", source, "--out", made, "-q").code == 0
    mine = {
        "notes.md": b"# my notes\n",
        "notes.json": b'{"schema": "mine"}\n',
        "table.csv": b"label,value\n1,2\n",
        "page.html": b"<!DOCTYPE html>\n<title>mine</title>\n",
        # a matplotlib figure of the user's, all but cl-diag's creator like cl-diag's own
        "figure.svg": (made / "spectrum_embedding.svg")
        .read_bytes()
        .replace(b"<dc:title>cl-diag</dc:title>", b"<dc:title>me</dc:title>"),
        "report.md": b"# my report\n",  # where analyze writes
    }
    out = tmp_path / "out"
    out.mkdir()
    for name, data in mine.items():
        (out / name).write_bytes(data)
    seals = {name: [seal(out / name, name) or ""] for name in mine}
    assert all(seals.values()) and not any(carries_mark(out / n, n) for n in mine)
    (out / OWNED_FILES).write_text(listing_text("analysis", seals))
    refused(
        run_cli("analyze", source, "--out", out, "-q"),
        "already holds report.md",
        "does not carry cl-diag's mark",
        "Nothing was written",
    )
    assert files(out) == {**mine, OWNED_FILES: listing_text("analysis", seals).encode()}
    # with the report moved away, the run goes through and leaves every other file alone
    (out / "report.md").rename(tmp_path / "report.md")
    done = run_cli("analyze", source, "--out", out, "-q")
    assert done.code == 0, done.err
    for name, data in mine.items():
        if name != "report.md":
            assert (out / name).read_bytes() == data, name
    # and cl-diag's own outputs, marked and listed, are replaced and pruned as before
    assert files(out)["report.md"] == files(made)["report.md"]
    assert run_cli("analyze", source, "--out", out, "-q").code == 0


@pytest.mark.slow
def test_every_file_cl_diag_writes_into_an_output_folder_carries_its_mark(run_cli, tmp_path):
    """What makes ownership provable: each file analyze, compare and reproduce write begins
    with cl-diag's mark for its suffix (a renderer that loses it would make every rerun refuse)."""
    from test_report import make_result

    from cl_diag.report import analysis_files, comparison_files
    from cl_diag.report.comparison import Comparison
    from cl_diag.report.reproduction import check_reproduction, reproduction_files
    from cl_diag.result import Result

    source = embeddings(tmp_path / "e.npz")
    analysis, comparison = tmp_path / "a", tmp_path / "c"
    assert run_cli("analyze", source, "--out", analysis, "-q").code == 0
    assert run_cli("compare", analysis, "--out", comparison, "-q").code == 0
    written = {
        f"{folder.name}/{name}": folder / name
        for folder in (analysis, comparison)
        for name in files(folder)
        if name != OWNED_FILES
    }
    assert "c/provenance.json" in written and "c/comparison.csv" in written
    runs = []
    for seed in (1, 2):
        d = make_result(n=40, n_ref=1000, batch_size=32, seed=seed)
        d["config"]["seed"] = seed
        runs.append((f"seed={seed}", Result.from_dict(d)))
    rendered = [
        *analysis_files(runs[0][1]),
        ("result.json", runs[0][1].to_json().encode()),
        *comparison_files(Comparison(runs)),
        *reproduction_files(check_reproduction(runs, [r for _, r in runs])),
    ]
    names = {name for name, _ in rendered}
    assert {"comparison_by_seed.csv", "reproduction.json", "reproduction.html"} <= names
    for index, (name, data) in enumerate(rendered):
        (tmp_path / f"r{index}").mkdir()
        written[name] = tmp_path / f"r{index}" / name
        written[name].write_bytes(data)
    suffixes = {Path(name).suffix for name in written}
    assert suffixes == {".json", ".md", ".html", ".svg", ".csv"}
    unmarked = [name for name, path in written.items() if not carries_mark(path, name)]
    assert unmarked == []
    # the mark is the file's start: the same bytes under another start carry none
    assert not carries_mark(written["result.json"], "result.json.txt")
    (tmp_path / "x.md").write_bytes(b"\n" + written["report.md"].read_bytes())
    assert not carries_mark(tmp_path / "x.md", "x.md")
    # a user's notes about cl-diag are not cl-diag's documents
    (tmp_path / "notes.md").write_bytes(b"# cl-diag experiments\n\nmine\n")
    assert not carries_mark(tmp_path / "notes.md", "notes.md")


def test_figures_from_before_the_mark_are_refused_until_marked_then_rerun_identically(
    run_cli, tmp_path
):
    """An analysis written before the mark (figures naming no creator, in their files and inside
    report.html) is refused by name on a rerun; tools/reseal_listings.py marks the figures its
    listing proves -- giving exactly today's bytes -- after which a rerun replaces everything
    without --overwrite and writes the same bytes again."""
    import base64
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location(
        "reseal_listings", ROOT / "tools" / "reseal_listings.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)

    source = embeddings(tmp_path / "e.npz")
    out = tmp_path / "out"
    assert run_cli("analyze", source, "--out", out, "-q").code == 0
    today = files(out)
    creator = tool._CREATOR

    def unmark(data: bytes) -> bytes:
        def embedded(match: re.Match[bytes]) -> bytes:
            svg = base64.b64decode(match.group(1)).replace(creator, b"")
            return b"data:image/svg+xml;base64," + base64.b64encode(svg)

        return tool._EMBEDDED.sub(embedded, data.replace(creator, b""))

    old = {name: unmark(data) for name, data in today.items() if name != OWNED_FILES}
    assert old["spectrum_embedding.svg"] != today["spectrum_embedding.svg"]
    assert old["report.html"] != today["report.html"]
    for name, data in old.items():
        (out / name).write_bytes(data)
    (out / OWNED_FILES).write_text(
        listing_text("analysis", {name: [seal(out / name, name) or ""] for name in old})
    )
    refused(
        run_cli("analyze", source, "--out", out, "-q"),
        "does not carry cl-diag's mark",
        "--overwrite",
    )
    assert files(out)["report.html"] == old["report.html"]
    figures = [name for name in old if name.endswith(".svg")]
    said = tool.mark_figures(out / OWNED_FILES)
    assert said.endswith(f": {len(figures) + 1} file(s) marked"), said  # and report.html
    assert files(out) == today
    done = run_cli("analyze", source, "--out", out, "-q")
    assert done.code == 0, done.err
    assert files(out) == today


def test_removal_never_follows_a_link_out_of_out(run_cli, tmp_path):
    """A listing entry ``link/v.svg`` where ``out/link`` points outside removes nothing, even
    with a valid seal: every path is walked without following links."""
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    assert run_cli("analyze", embeddings(tmp_path / "e.npz"), "--out", out, "-q").code == 0
    # a figure of cl-diag's own, so that only the walk (not the mark) can keep it
    keep = (out / "spectrum_embedding.svg").read_bytes()
    (outside / "v.svg").write_bytes(keep)
    assert carries_mark(outside / "v.svg", "link/v.svg")
    (out / "link").symlink_to(outside)
    lines = [
        f"{seal(outside / 'v.svg', 'link/v.svg')}  link/v.svg",
        f"{hashlib.sha256(keep).hexdigest()}  link/v.svg",
    ]
    with open(out / OWNED_FILES, "a", encoding="utf-8") as listing:
        listing.write("\n".join(lines) + "\n")
    done = run_cli("analyze", tmp_path / "e.npz", "--out", out, "-q")
    assert done.code == 0, done.err
    assert (outside / "v.svg").read_bytes() == keep


def test_a_sweep_never_writes_through_a_linked_cell(run_cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "vrn=3").symlink_to(outside)
    args = ["sweep", TOY, "--grid", "vrn=0,3", "--steps", "3", "--out", out, "--quiet"]
    refused(run_cli(*args), "vrn=3 is a symbolic link", "Nothing was trained")
    assert list(outside.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["vrn=3"]
    (out / "vrn=3").unlink()
    (out / "comparison").symlink_to(outside)
    refused(run_cli(*args), "comparison is a symbolic link")
    assert list(outside.iterdir()) == []


def test_one_folder_holds_one_kind_of_output(run_cli, tmp_path):
    """An analysis into a comparison's folder is refused (the reverse already was), and with
    --overwrite it replaces the comparison: its files cl-diag wrote are removed."""
    source = embeddings(tmp_path / "e.npz")
    analysis, comparison = tmp_path / "a", tmp_path / "c"
    assert run_cli("analyze", source, "--out", analysis, "-q").code == 0
    assert run_cli("compare", analysis, "--out", comparison, "-q").code == 0
    before = files(comparison)
    refused(
        run_cli("analyze", source, "--out", comparison, "-q"),
        "holds a comparison",
        "--overwrite",
    )
    assert files(comparison) == before
    done = run_cli("analyze", source, "--out", comparison, "-q", "--overwrite")
    assert done.code == 0, done.err
    assert not (comparison / "comparison.csv").exists()
    assert (comparison / "result.json").is_file()
    assert (comparison / OWNED_FILES).read_text().startswith("# cl-diag-owned 2 analysis:")


def test_a_users_folder_named_like_a_staging_folder_stays(run_cli, tmp_path):
    out = tmp_path / "out"
    mine = [tmp_path / ".out.staging-999999999-abcdefgh", tmp_path / ".cl-diag-staging-1-zzzz"]
    mine.append(tmp_path / ".cl-diag-staging-999999999-abcdefgh")  # the very pattern
    for folder in mine:
        folder.mkdir()
        (folder / "thesis.tex").write_text("mine")
    assert run_cli("analyze", embeddings(tmp_path / "e.npz"), "--out", out, "-q").code == 0
    for folder in mine:
        assert (folder / "thesis.tex").read_text() == "mine"


@pytest.mark.parametrize("key", ["out", "overwrite", "resume"])
def test_no_recipe_or_probe_suite_chooses_where_output_goes(run_cli, tmp_path, key):
    value = "true" if key == "overwrite" else f'"{tmp_path / "elsewhere"}"'
    probe = tmp_path / "probe.toml"
    probe.write_text(f'probes = "none"\n{key} = {value}\n')
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(TOY.read_text() + f"\n{key} = {value}\n")
    source = embeddings(tmp_path / "e.npz")
    if key != "resume":  # analyze has no --resume
        refused(
            run_cli("analyze", source, "--probe", probe, "--out", tmp_path / "a", "-q"),
            f"'{key}' decides where the command writes",
        )
    refused(
        run_cli("train", recipe, "--steps", "2", "--out", tmp_path / "t", "--quiet"),
        f"'{key}' decides where the command writes",
    )
    refused(
        run_cli("sweep", recipe, "--grid", "vrn=0,3", "--steps", "2", "--out", tmp_path / "s"),
        f"'{key}' decides",
    )
    assert not (tmp_path / "elsewhere").exists()
    assert not any((tmp_path / name).exists() for name in ("a", "t", "s"))


def test_an_empty_out_is_refused(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = embeddings(tmp_path / "e.npz")
    for args in (
        ["analyze", source, "--out", ""],
        ["analyze", source, "--out="],
        ["compare", tmp_path, "-o", " "],
        ["train", TOY, "--steps", "2", "--out", ""],
        ["sweep", TOY, "--grid", "vrn=0,3", "--out", ""],
    ):
        refused(run_cli(*args), "--out is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npz"]
