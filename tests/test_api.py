"""The Python API (cl_diag.measure / load / compare / Result.save): one code path with the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cl_diag
from cl_diag.errors import UserError
from cl_diag.result import is_result_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "api.py"


def _views(n: int = 80, d: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d))  # float64: rounded to float32 as a file's are
    z2 = z1 + 0.5 * rng.standard_normal((n, d))
    return z1, z2, np.arange(n) % 4


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_import_is_light_and_pulls_no_optional_extra():
    code = (
        "import sys, cl_diag\n"
        "heavy = ('torch', 'pandas', 'lightning', 'timm', 'lightly')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "cl_diag.measure, cl_diag.load, cl_diag.compare, cl_diag.Monitor, cl_diag.Result\n"
        "print(sorted(m for m in heavy[2:] if m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["[]", "[]"]
    assert "measure" in dir(cl_diag) and "Monitor" in dir(cl_diag)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        cl_diag.nothing  # noqa: B018


def test_measure_and_save_write_what_the_cli_writes(tmp_path, run_cli):
    z1, z2, labels = _views()
    np.savez(tmp_path / "pairs.npz", z1=z1, z2=z2, labels=labels)
    cli = run_cli("analyze", tmp_path / "pairs.npz", "--out", tmp_path / "cli", "--n-ref", "5000")
    assert cli.code == 0, cli.err
    res = cl_diag.measure(z1, z2, labels, n_ref=5000)
    assert isinstance(res, cl_diag.Result) and isinstance(res, cl_diag.result.Result)
    assert res.source.kind == "arrays" and re.fullmatch(r"[0-9a-f]{64}", res.source.sha256)
    written = cl_diag.load(tmp_path / "cli")
    # everything but the source is the same measurement, byte for byte ...
    # (and the command: cl_diag.measure has none to re-run, the CLI records its analyze options)
    assert dataclasses.replace(res, source=written.source, commands=written.commands).to_json() == (
        tmp_path / "cli" / "result.json"
    ).read_text(encoding="utf-8")
    # ... and saved, every file the CLI wrote (result.json, both reports, the figures)
    folder = dataclasses.replace(res, source=written.source, commands=written.commands).save(
        tmp_path / "api"
    )
    assert folder == tmp_path / "api"
    assert _files(tmp_path / "api") == _files(tmp_path / "cli")
    assert len(_files(tmp_path / "api")) >= 5
    stats = res.layers["embedding"].pairs["cross_view_negative"]
    assert stats.count == 80 * 79 and stats.by_class is not None
    assert stats.excessive_ratio == stats.excessive_count / stats.count


def test_measure_takes_torch_and_numpy_alike_and_reads_by_attribute():
    z1, z2, labels = _views(n=40, d=6, seed=1)
    from_numpy = cl_diag.measure(z1, z2, labels, n_ref=1000)
    from_torch = cl_diag.measure(torch.from_numpy(z1), torch.from_numpy(z2), torch.tensor(labels))
    # n_ref defaults to n = 40: another threshold, the same statistics
    assert from_torch.n_ref == 40 and from_torch.delta == -1 / 39
    a, b = (r.layers["embedding"].pairs["positive"] for r in (from_numpy, from_torch))
    assert a == b
    u = z1.astype(np.float32) / np.linalg.norm(z1.astype(np.float32), axis=1, keepdims=True)
    v = z2.astype(np.float32) / np.linalg.norm(z2.astype(np.float32), axis=1, keepdims=True)
    assert a.mean == pytest.approx(float(np.mean(np.sum(u * v, axis=1))), abs=1e-6)
    frame = from_numpy.to_frame()
    row = frame[
        (frame.pair_type == "cross_view_negative")
        & (frame.split == "all")
        & (frame.statistic == "excessive_ratio")
    ]
    cross = from_numpy.layers["embedding"].pairs["cross_view_negative"]
    assert row.value.tolist() == [cross.excessive_ratio]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda z: cl_diag.measure(z, z, n_ref=1), "n_ref=1 must be at least 2 (the threshold"),
        (lambda z: cl_diag.measure(z, z, n_ref=5e4), "n_ref=50000.0 must be a whole number"),
        (
            lambda z: cl_diag.measure(z, z, pairs="all"),
            "pairs='all' is not one of: exact, sampled, moments",
        ),
        (lambda z: cl_diag.measure(z, z, num_pairs=0), "num_pairs=0 must be in [1, 1000000000]"),
        (lambda z: cl_diag.measure(z, z[:5]), "differ in shape"),
        (lambda z: cl_diag.measure(z[0], z[0]), "it must be 2-D"),
        (lambda z: cl_diag.measure(z, z, labels=[1, 2]), "one integer per row"),
        (lambda z: cl_diag.measure(z, z, labels=np.full(10, 0.5)), "not whole numbers"),
    ],
)
def test_measure_mistakes_are_user_errors_naming_the_fix(call, message):
    z = np.ones((10, 3)) + np.eye(10, 3)
    with pytest.raises(UserError, match=re.escape(message)):
        call(z)


def test_measure_names_bad_rows_of_the_arrays():
    z1, z2, _ = _views(n=10, d=3)
    z1[7] = np.nan
    with pytest.raises(UserError) as err:
        cl_diag.measure(z1, z2)
    assert "'z1' in the arrays given to cl_diag.measure contains NaN or Inf" in str(err.value)
    assert "[7]" in str(err.value)


def test_save_refuses_files_it_did_not_write_unless_overwrite(tmp_path):
    z1, z2, _ = _views(n=20, d=4)
    res = cl_diag.measure(z1, z2)
    res.save(tmp_path / "out")
    res.save(tmp_path / "out")  # its own files: replaced without asking
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my notes\n", encoding="utf-8")
    (mine / "data.csv").write_text("1,2\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"already holds report\.md, which cl-diag did not write"):
        res.save(mine)
    # nothing replaced, nothing added, no staging folder left beside it
    assert _files(mine) == {"data.csv": b"1,2\n", "report.md": b"my notes\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "out"]
    res.save(mine, overwrite=True)
    assert (mine / "report.md").read_text(encoding="utf-8").startswith("# cl-diag analysis")
    assert (mine / "data.csv").read_text(encoding="utf-8") == "1,2\n"
    # a .json path writes that one file
    assert res.save(tmp_path / "only.json") == tmp_path / "only.json"
    assert cl_diag.load(tmp_path / "only.json").to_json() == res.to_json()
    assert is_result_file(tmp_path / "only.json") and not is_result_file(mine / "data.csv")


def test_cli_analyze_refuses_a_foreign_report_without_overwrite(tmp_path, run_cli, pairs_file):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("<p>mine</p>", encoding="utf-8")
    r = run_cli("analyze", pairs_file, "--out", out, "--quiet")
    assert r.code == 2 and "already holds report.html" in r.err and "--overwrite" in r.err
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]
    r = run_cli("analyze", pairs_file, "--out", out, "--quiet", "--overwrite")
    assert r.code == 0, r.err
    r = run_cli("analyze", pairs_file, "--out", out, "--quiet")  # now all cl-diag's own
    assert r.code == 0, r.err


def test_load_is_the_checked_typed_result(tmp_path):
    z1, z2, _ = _views(n=20, d=4)
    res = cl_diag.measure(z1, z2)
    res.save(tmp_path / "out")
    again = cl_diag.load(tmp_path / "out" / "result.json")
    assert type(again) is cl_diag.Result and again == res
    bad = json.loads((tmp_path / "out" / "result.json").read_text(encoding="utf-8"))
    bad["schema"] = "cl-diag/result/99"
    (tmp_path / "bad.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(UserError, match="newer than this cl-diag reads"):
        cl_diag.load(tmp_path / "bad.json")


@pytest.mark.slow
def test_compare_is_the_cli_compare(tmp_path, run_cli):
    for name, noise in (("tight", 0.2), ("loose", 1.0)):
        z1, _, _ = _views(n=30, d=5)
        z2 = z1 + noise * np.random.default_rng(3).standard_normal(z1.shape)
        cl_diag.measure(z1, z2).save(tmp_path / name)
    runs = [tmp_path / "tight", tmp_path / "loose"]
    api = cl_diag.compare(runs, out=tmp_path / "api", baseline=tmp_path / "loose")
    r = run_cli("compare", *runs, "--out", tmp_path / "cli", "--baseline", tmp_path / "loose")
    assert r.code == 0, r.err
    assert _files(tmp_path / "api") == _files(tmp_path / "cli")
    assert api.report_html == tmp_path / "api" / "report.html"
    by_label = api.frame.set_index("label")["embedding/positive_mean"]
    assert by_label["tight"] > by_label["loose"]
    with pytest.raises(UserError, match="takes a list of runs"):
        cl_diag.compare(str(tmp_path / "tight"), out=tmp_path / "x")


@pytest.mark.slow  # end to end: the full suite runs it
def test_the_example_script_runs_and_the_readme_shows_it(tmp_path):
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    ratio = re.search(r"below -1/\(n_ref - 1\): ([\d.]+)% of 999000", run.stdout)
    assert ratio and 0 < float(ratio.group(1)) < 100
    assert f"report: {tmp_path / 'comparison' / 'report.html'}" in run.stdout
    for folder in ("tight", "loose"):
        assert cl_diag.load(tmp_path / folder).layers["embedding"].n == 1000
    assert (tmp_path / "comparison" / "comparison.csv").is_file()
    # the README's Python API example is this script's code, after its docstring
    code = EXAMPLE.read_text(encoding="utf-8").split('"""', 2)[2].strip()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0].strip()
    assert block == code
