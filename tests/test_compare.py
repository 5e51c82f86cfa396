"""``cl-diag compare``: labels, tables, CSV, figures, reproducibility, bad input, a real browser."""

from __future__ import annotations

import html as htmllib
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import make_result, md_row

from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.report.comparison.studies import _band
from cl_diag.report.document import fmt, pct
from cl_diag.report.runs import run_labels as _run_labels
from cl_diag.result import Result, load

GRID = [(b, v) for b in (32, 64, 128) for v in (0.0, 30.0)]


def typed(runs: list[tuple[str, dict]]) -> list[tuple[str, Result]]:
    """(name, result dict) pairs as the reports take them: typed results."""
    return [(name, Result.from_dict(result)) for name, result in runs]


def run_labels(runs: list[tuple[str, dict]]) -> list[str]:
    return _run_labels(typed(runs))


def write_run(root: Path, folder: str, result: dict) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "result.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The paper's batch-size study in miniature: 3 batch sizes x with/without VRN, compared
    once."""
    root = tmp_path_factory.mktemp("grid")
    runs = {
        (b, v): write_run(
            root,
            f"runs/b{b}-vrn{int(v)}/analysis",
            make_result(n=40, n_ref=50000, batch_size=b, vrn=v),
        )
        for b, v in GRID
    }
    baseline = runs[(128, 0.0)]
    outcome = compare(
        CompareConfig(inputs=sorted(runs.values()), out=root / "cmp", baseline=baseline)
    )
    return root, runs, outcome


def _results(runs: dict) -> dict:
    return {key: json.loads((path / "result.json").read_text()) for key, path in runs.items()}


# ---- labels -------------------------------------------------------------------------------------


def test_labels_name_what_differs():
    runs = [
        (f"r{b}{v}", make_result(n=10, batch_size=b, vrn=v, probes=False, theory=False))
        for b, v in GRID
    ]
    assert run_labels(runs) == [
        "simclr b32",
        "simclr b32 +VRN30",
        "simclr b64",
        "simclr b64 +VRN30",
        "simclr b128",
        "simclr b128 +VRN30",
    ]
    temps = [
        (f"t{t}", make_result(n=10, temperature=t, probes=False, theory=False)) for t in (0.1, 0.5)
    ]
    assert run_labels(temps) == ["simclr t0.1", "simclr t0.5"]
    other = [
        ("a", make_result(n=10, config={"loss": "dcl", "epochs": 5})),
        ("b", make_result(n=10, config={"loss": "dcl", "epochs": 10})),
    ]
    assert run_labels(other) == ["dcl epochs=5", "dcl epochs=10"]


def test_labels_from_nested_config_and_ignored_keys():
    a = make_result(
        n=10,
        config={
            "loss": {"name": "dcl", "temperature": 0.5},
            "vrn": {"enabled": True, "lambda": 3.0},
            "out": "x",
        },
    )
    b = make_result(
        n=10,
        config={
            "loss": {"name": "dcl", "temperature": 0.5},
            "vrn": {"enabled": False, "lambda": 3.0},
            "out": "y",
        },
    )
    # 'out' says where a run was written, not what was trained: it must not enter the label
    assert run_labels([("x", a), ("y", b)]) == ["dcl +VRN3", "dcl"]


def test_labels_fall_back_to_folder_names():
    same = make_result(n=10)
    assert run_labels([("runs/a/analysis", same), ("runs/b/analysis", same)]) == [
        "a/analysis",
        "b/analysis",
    ]
    empty = make_result(n=10, config={})
    assert run_labels([("x/one", empty), ("x/two", empty)]) == ["one", "two"]
    assert run_labels([("x/one", empty), ("x/one", empty)]) == ["x/one #1", "x/one #2"]
    # two runs the configs cannot tell apart, a third they can
    b32, b64 = make_result(n=10, batch_size=32), make_result(n=10, batch_size=64)
    assert run_labels([("s/a", b32), ("s/b", b32), ("s/c", b64)]) == [
        "simclr b32 [a]",
        "simclr b32 [b]",
        "simclr b64",
    ]


# ---- the comparison of the grid ---------------------------------------------------------------


def test_outputs_and_returned_result(grid):
    root, runs, outcome = grid
    out = root / "cmp"
    assert outcome.report_html == out / "report.html" and outcome.csv == out / "comparison.csv"
    assert (
        sorted(p.name for p in out.iterdir())
        == sorted(p.name for p in outcome.files)
        == [
            ".cl-diag-owned",
            "accuracy_vs_batch.svg",
            "comparison.csv",
            "negatives_backbone.svg",
            "negatives_projector.svg",
            "provenance.json",
            "report.html",
            "report.md",
            "variance_vs_batch.svg",
        ]
    )
    assert outcome.warnings == []
    assert outcome.labels[runs[(32, 30.0)].as_posix()] == "simclr b32 +VRN30"
    # no staging folder left beside --out
    assert sorted(p.name for p in root.iterdir()) == ["cmp", "runs"]


def test_tables_hold_each_runs_numbers(grid):
    root, runs, _ = grid
    md = (root / "cmp" / "report.md").read_text(encoding="utf-8")
    results = _results(runs)
    r = results[(64, 30.0)]
    pairs = r["layers"]["projector"]["pairs"]
    row = md_row(md, "simclr b64 +VRN30", after="*Pair similarities, layer 'projector'.*")
    assert row == [
        fmt(pairs["positive"]["mean"]),
        fmt(pairs["cross_view_negative"]["mean"]),
        fmt(pairs["cross_view_negative"]["var"]),
        fmt(pairs["cross_view_negative"]["std"]),
        fmt(pairs["cross_view_negative"]["excessive_ratio"]),
        fmt(pairs["within_view_negative"]["mean"]),
        fmt(pairs["within_view_negative"]["var"]),
        fmt(pairs["within_view_negative"]["std"]),
        fmt(pairs["within_view_negative"]["excessive_ratio"]),
    ]
    geo = r["layers"]["backbone"]["geometry"]
    row = md_row(md, "simclr b64 +VRN30", after="*Geometry, layer 'backbone'.*")
    assert row[:3] == [
        fmt(geo["alignment"]),
        fmt(geo["uniformity"]["u"]),
        fmt(geo["uniformity"]["v"]),
    ]
    row = md_row(md, "simclr b64 +VRN30", after="## Probes")
    assert row[0] == pct(r["probes"]["linear"]["top1"])


def test_baseline_differences(grid):
    root, runs, _ = grid
    md = (root / "cmp" / "report.md").read_text(encoding="utf-8")
    results = _results(runs)
    base, run = results[(128, 0.0)], results[(32, 0.0)]
    after = "run − baseline (simclr b128)"
    row = md_row(md, "simclr b32", after=after)
    var = lambda x: x["layers"]["projector"]["pairs"]["cross_view_negative"]["var"]  # noqa: E731
    assert row[2] == f"{var(run) - var(base):+.4g}"  # reports print 4 significant digits
    assert md_row(md, "simclr b128", after=after)[2] == "+0"
    probe_row = md_row(md, "simclr b32", after="Probes: run − baseline")
    # 0.80 - 0.5/32 against 0.80 - 0.5/128: -1.171875 percentage points
    assert probe_row[0] == "-1.17 pp"


def test_runs_table_marks_the_baseline(grid):
    root, runs, _ = grid
    md = (root / "cmp" / "report.md").read_text(encoding="utf-8")
    # the runs table follows the Findings section
    row = md_row(md, "simclr b128 (baseline)", after="## Runs")
    assert row == [
        runs[(128, 0.0)].as_posix(),
        "simclr",
        "128",
        "0.2",
        "0",
        "50000",
        "-2e-05",
        "exact",
        "projector, backbone",
        "—",  # the fixture's runs have no report.html to link
    ]
    assert md_row(md, "simclr b32 +VRN30", after="## Runs")[:6] == [
        runs[(32, 30.0)].as_posix(),
        "simclr",
        "32",
        "0.2",
        "30",
        "50000",
    ]


def test_table1_view(grid):
    root, runs, _ = grid
    md = (root / "cmp" / "report.md").read_text(encoding="utf-8")
    results = _results(runs)
    after = "## Batch-size study"
    header = next(
        line for line in md[md.index(after) :].splitlines() if line.startswith("| batch size m")
    )
    assert header == "| batch size m | simclr | simclr +VRN30 |"
    for b in (32, 64, 128):
        var = [
            results[(b, v)]["layers"]["projector"]["pairs"]["cross_view_negative"]["var"]
            for v in (0.0, 30.0)
        ]
        assert md_row(md, str(b), after=after) == [fmt(var[0], 4), fmt(var[1], 4)]
    assert "Theorem 5.5 (Eq. 11)" in md and "n = n_ref = 50000" in md


def test_variance_band_matches_theorem_5_5_by_hand():
    # n = 4, m = 2 (paper Fig. 2): [2/9, 8/9]; n = 50000, m = 32: lower 49968/(31 * 49999^2)
    ms, lo, hi = _band(4, [2.0, 3.0])
    assert ms[0] == 2.0 and lo[0] == pytest.approx(2 / 9) and hi[0] == pytest.approx(8 / 9)
    ms, lo, hi = _band(50000, [32.0, 128.0])
    assert ms[0] == 32 and ms[-1] == 128
    assert lo[0] == pytest.approx(49968 / (31 * 49999**2), rel=1e-12)
    assert hi[0] == pytest.approx(50000 * 49968 / (31 * 49999**2), rel=1e-12)
    assert all(a > b for a, b in itertools.pairwise(hi)), "the upper bound decreases with m"


def test_csv_columns_and_values(grid):
    root, runs, _ = grid
    frame = pd.read_csv(root / "cmp" / "comparison.csv")
    metrics = [
        "positive_mean",
        *[
            f"{k}_{s}"
            for k in ("cross_view_negative", "within_view_negative")
            for s in ("mean", "var", "std", "excessive_ratio")
        ],
        "alignment",
        "uniformity_u",
        "uniformity_v",
        "effective_rank_u",
        "effective_rank_v",
        "frontier_gap",
        "alignment_ceiling",
        # class-collapse metrics (issue 14): empty here, make_result writes no collapse block
        "within_class_variance",
        "between_class_variance",
        "total_variance",
        "s_w",
        "s_b",
        "ssem_residual",
        "linear_top1",
        "linear_top5",
        "knn_k20_top1",
        "knn_k200_top1",
        "clustering_nmi",
        "clustering_ari",
        "retrieval_recall_at_1",
        "retrieval_recall_at_5",
        "retrieval_recall_at_10",
    ]
    ids = [
        "label",
        "run",
        "layer",
        "loss",
        "batch_size",
        "temperature",
        "vrn",
        "n_ref",
        "threshold",
        "mode",
        "n",
        "d",
    ]
    assert list(frame.columns) == ids + metrics + [f"delta_{m}" for m in metrics]
    assert len(frame) == len(GRID) * 2
    # natural order of the labels, projector before backbone
    assert list(frame["label"][::2]) == [
        "simclr b32",
        "simclr b32 +VRN30",
        "simclr b64",
        "simclr b64 +VRN30",
        "simclr b128",
        "simclr b128 +VRN30",
    ]
    results = _results(runs)
    row = frame[(frame.label == "simclr b32 +VRN30") & (frame.layer == "backbone")].iloc[0]
    r = results[(32, 30.0)]
    # floats round-trip exactly through the CSV
    assert (
        row.cross_view_negative_var
        == r["layers"]["backbone"]["pairs"]["cross_view_negative"]["var"]
    )
    assert row.linear_top1 == r["probes"]["linear"]["top1"]
    assert row.retrieval_recall_at_5 == 0.75
    base = results[(128, 0.0)]
    expected = (
        r["layers"]["backbone"]["geometry"]["alignment"]
        - base["layers"]["backbone"]["geometry"]["alignment"]
    )
    assert row.delta_alignment == pytest.approx(expected, abs=1e-15)
    assert (frame[frame.label == "simclr b128"].delta_positive_mean == 0).all()
    assert (row.batch_size, row.vrn, row.n_ref, row.d) == (32, 30.0, 50000, 512)


def test_same_inputs_same_bytes_whatever_their_order(grid, tmp_path):
    root, runs, _ = grid
    again = compare(
        CompareConfig(
            inputs=sorted(runs.values(), reverse=True),
            out=tmp_path / "again",
            baseline=runs[(128, 0.0)],
        )
    )
    for path in again.files:
        assert path.read_bytes() == (root / "cmp" / path.name).read_bytes(), path.name


def test_temperature_study_and_no_batch_study(tmp_path):
    runs = [
        write_run(tmp_path, f"t{t}", make_result(n=20, temperature=t, layers=("embedding",)))
        for t in (0.1, 0.2, 0.5)
    ]
    outcome = compare(CompareConfig(inputs=runs, out=tmp_path / "cmp"))
    names = sorted(p.name for p in outcome.files)
    assert names == [
        ".cl-diag-owned",
        "accuracy_vs_temperature.svg",
        "comparison.csv",
        "negatives_embedding.svg",
        "provenance.json",
        "report.html",
        "report.md",
    ]
    md = outcome.report_md.read_text(encoding="utf-8")
    assert "Fig. 3 view" in md and "## Batch-size study" not in md


def test_different_n_ref_warns_and_shows_both_thresholds(tmp_path, run_cli):
    a = write_run(tmp_path, "a", make_result(n=20, n_ref=50000, layers=("embedding",), config={}))
    b = write_run(tmp_path, "b", make_result(n=20, n_ref=1001, layers=("embedding",), config={}))
    outcome = compare(CompareConfig(inputs=[a, b], out=tmp_path / "cmp"))
    assert len(outcome.warnings) == 1 and "different n_ref" in outcome.warnings[0]
    assert "a: n_ref = 50000, δ = -2e-05; b: n_ref = 1001, δ = -0.001" in outcome.warnings[0]
    md = outcome.report_md.read_text(encoding="utf-8")
    assert "> **Note.** The runs have different n_ref" in md
    assert "n_ref = 50000: δ = -2e-05; n_ref = 1001: δ = -0.001" in md
    cli = run_cli("compare", a, b, "--out", tmp_path / "cmp2")
    assert cli.code == 0
    assert "warning:" in cli.err and "different n_ref" in cli.err
    assert cli.out.strip().endswith(f"report: {tmp_path / 'cmp2' / 'report.html'}")


def test_baseline_outside_inputs_is_added(tmp_path):
    a = write_run(tmp_path, "a", make_result(n=20, batch_size=32, layers=("embedding",)))
    ref = write_run(tmp_path, "ref", make_result(n=20, batch_size=256, layers=("embedding",)))
    outcome = compare(CompareConfig(inputs=[a / "result.json"], out=tmp_path / "cmp", baseline=ref))
    assert list(outcome.labels.values()) == ["simclr b256", "simclr b32"]
    md = outcome.report_md.read_text(encoding="utf-8")
    assert md_row(md, "simclr b256 (baseline)", after="## Runs")[0] == ref.as_posix()


def test_cli_help_has_an_example(run_cli):
    cli = run_cli("compare", "--help")
    assert cli.code == 0
    assert "Example:" in cli.out and "cl-diag compare runs/*/analysis --out reports/mine" in cli.out


# ---- bad input ----------------------------------------------------------------------------------


def _bad(tmp_path: Path, kind: str) -> tuple[list, str]:
    good = write_run(tmp_path, "good", make_result(n=10, layers=("embedding",)))
    if kind == "no_result":
        empty = tmp_path / "empty"
        empty.mkdir()
        return [good, empty], "has no result.json"
    if kind == "schema":
        old = make_result(n=10, layers=("embedding",))
        old["schema"] = "cl-diag/result/0"
        return [
            good,
            write_run(tmp_path, "old", old),
        ], "has schema 'cl-diag/result/0'; this cl-diag reads 'cl-diag/result/1'"
    if kind == "truncated":
        cut = write_run(tmp_path, "cut", make_result(n=10, layers=("embedding",)))
        text = (cut / "result.json").read_text()
        (cut / "result.json").write_text(text[: len(text) // 2])
        return [good, cut], "is not valid JSON"
    if kind == "binary":
        blob = tmp_path / "blob.json"
        blob.write_bytes(b"\x80\x81\xff\x00")
        return [good, blob], "is not a text file"
    if kind == "missing":
        return [good, tmp_path / "nowhere"], "does not exist"
    if kind == "no_layers":
        bare = make_result(n=10, layers=("embedding",))
        bare["layers"] = {}
        return [good, write_run(tmp_path, "bare", bare)], "has no measured layers"
    if kind == "out_is_a_run":
        return [good], "is the folder of the run"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["no_result", "schema", "truncated", "binary", "missing", "no_layers", "out_is_a_run"]
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, run_cli, kind):
    inputs, message = _bad(tmp_path, kind)
    out = tmp_path / "good" if kind == "out_is_a_run" else tmp_path / "reports" / "cmp"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    cli = run_cli("compare", *inputs, "--out", out)
    assert cli.code == 2
    assert message in cli.err
    assert "Traceback" not in cli.err + cli.out
    # the message names the offending path (or --out) and how to fix it
    assert str(inputs[-1] if kind != "out_is_a_run" else out) in cli.err.replace("\n", "")
    assert re.search(r"Pass|Re-run|Choose|Check", cli.err)
    # nothing half-written: not --out, not its parent, no staging folder
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_missing_out_option_is_a_usage_error(tmp_path, run_cli):
    run = write_run(tmp_path, "a", make_result(n=10, layers=("embedding",)))
    cli = run_cli("compare", run)
    assert cli.code == 2 and "--out" in cli.err


# ---- a real browser -----------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
# Injected into a copy of the page: records error events (a failed <img> fires one, captured on
# window) and console.error calls, then, once everything has loaded, measures every figure and
# writes the findings into the DOM, which --dump-dom prints.
PROBE_HEAD = """<script>
window.__clErrors = [];
window.addEventListener('error', function (e) {
  var t = e.target || {};
  window.__clErrors.push(e.message || ('failed to load ' + (t.src || t.href || t.tagName)));
}, true);
var __clConsoleError = console.error;
console.error = function () {
  window.__clErrors.push(Array.prototype.join.call(arguments, ' '));
  __clConsoleError.apply(console, arguments);
};
</script>"""
PROBE_BODY = """<script>
window.addEventListener('load', function () {
  var figs = Array.prototype.map.call(document.querySelectorAll('img, svg'), function (el) {
    var r = el.getBoundingClientRect();
    return {tag: el.tagName.toLowerCase(), width: r.width, height: r.height,
            natural: el.naturalWidth === undefined ? -1 : el.naturalWidth,
            complete: el.complete === undefined ? true : el.complete};
  });
  var root = document.documentElement;
  var wraps = Array.prototype.map.call(document.querySelectorAll('.table-wrap'), function (el) {
    var r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, inner: el.scrollWidth, outer: el.clientWidth};
  });
  var headings = Array.prototype.map.call(document.querySelectorAll('h2'), function (el) {
    return el.textContent;
  });
  var pre = document.createElement('pre');
  pre.id = 'cl-diag-probe';
  pre.textContent = JSON.stringify({errors: window.__clErrors, figures: figs,
    tables: document.querySelectorAll('table').length,
    rows: document.querySelectorAll('tbody tr').length, headings: headings,
    viewport: root.clientWidth, page: root.scrollWidth, wraps: wraps});
  document.body.appendChild(pre);
});
</script>"""


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _open_in_browser(page: Path, tmp_path: Path) -> dict:
    # 1. the page as written: no console message at all (the page has no script), and a screenshot
    shot = tmp_path / f"{page.parent.name}-screenshot.png"
    plain = _chromium(
        tmp_path,
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2400",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert plain.returncode == 0, plain.stderr[-2000:]
    console = [line for line in plain.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    # 2. a copy in another folder (so a relative link would break) with the probe injected
    text = page.read_text(encoding="utf-8")
    probe = tmp_path / f"{page.parent.name}-probe" / "probe.html"
    probe.parent.mkdir()
    probe.write_text(
        text.replace("<head>", "<head>\n" + PROBE_HEAD, 1).replace(
            "</body>", PROBE_BODY + "\n</body>", 1
        ),
        encoding="utf-8",
    )
    # a narrow window (480 px, a phone): wide tables scroll inside their box, not the page
    dumped = _chromium(
        tmp_path,
        "--virtual-time-budget=5000",
        "--window-size=480,2000",
        "--dump-dom",
        probe.as_uri(),
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    found = re.search(r'<pre id="cl-diag-probe">(.*?)</pre>', dumped.stdout, re.S)
    assert found, "the page did not finish loading"
    report = json.loads(htmllib.unescape(found.group(1)))
    report["screenshot"] = shot
    return report


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it",
)
def test_reports_render_in_headless_chromium(grid, tmp_path):
    from PIL import Image

    from cl_diag.report import render_analysis

    _, runs, outcome = grid
    single = tmp_path / "single"
    single.mkdir()
    render_analysis(load(runs[(32, 30.0)] / "result.json"), single)
    for page in (outcome.report_html, single / "report.html"):
        md = page.with_name("report.md").read_text(encoding="utf-8")
        report = _open_in_browser(page, tmp_path)
        assert report["errors"] == []
        figures = report["figures"]
        assert len(figures) == len(list(page.parent.glob("*.svg"))) > 0
        for fig in figures:
            assert fig["tag"] == "img" and fig["complete"] and fig["natural"] > 0, fig
            assert fig["width"] > 100 and fig["height"] > 100, fig
        assert report["tables"] == md.count("\n|---") > 0
        assert report["rows"] > 20
        # issue 12: the Findings section comes first, and no table overflows the page width
        assert report["headings"][0] == "Findings", report["headings"]
        assert report["page"] <= report["viewport"], (report["page"], report["viewport"])
        assert len(report["wraps"]) == report["tables"]
        for wrap in report["wraps"]:
            assert wrap["left"] >= 0 and wrap["right"] <= report["viewport"], wrap
        # ... while some table is wider than the window, and scrolls inside its box
        assert any(w["inner"] > w["outer"] for w in report["wraps"])
        image = Image.open(report["screenshot"])
        assert image.size == (1280, 2400)
        low, high = image.convert("L").getextrema()
        assert high - low > 128, "the screenshot is blank"


# ---- seed groups ---------------------------------------------------------------------------------


def _seed_runs(tmp_path: Path, seeds=(1, 2, 3), vrns=(0.0, 3.0)) -> dict:
    """The rebuttal's toy layout in miniature: n = n_ref = 4 instances, seeds x with/without VRN."""
    return {
        (s, v): write_run(
            tmp_path,
            f"seed={s}_vrn={int(v)}/analysis",
            make_result(
                n=4,
                n_ref=4,
                d=3,
                batch_size=2,
                vrn=v,
                temperature=0.5,
                seed=s,
                layers=("embedding",),
                labels=False,
                theory=False,
            ),
        )
        for s in seeds
        for v in vrns
    }


def test_seed_labels_and_groups(tmp_path):
    from cl_diag.report.runs import ordered, seed_groups

    runs = ordered(
        typed(
            [
                (f"{s}-{v}", make_result(n=10, seed=s, vrn=v, probes=False, theory=False))
                for v in (0.0, 3.0)
                for s in (2, 1)
            ]
        )
    )
    assert _run_labels(runs) == [
        "simclr seed1",
        "simclr seed2",
        "simclr +VRN3 seed1",
        "simclr +VRN3 seed2",
    ]
    groups = seed_groups(runs)
    assert [(g.label, g.members, g.seeds) for g in groups] == [
        ("simclr", (0, 1), (1, 2)),
        ("simclr +VRN3", (2, 3), (1, 2)),
    ]
    # differing in more than the seed, or a repeated seed: no group
    mixed = ordered(
        typed(
            [
                ("a", make_result(n=10, seed=1, batch_size=32)),
                ("b", make_result(n=10, seed=2, batch_size=64)),
            ]
        )
    )
    assert seed_groups(mixed) == []
    repeated = typed([(f"r{i}", make_result(n=10, seed=1)) for i in range(2)])
    assert seed_groups(repeated) == []
    # replicates are measured alike: the same seeds under another n_ref are no group with these
    other = make_result(n=10, seed=3, vrn=0.0, probes=False, theory=False)
    other["n_ref"], other["threshold"] = 5, -0.25
    assert [g.members for g in seed_groups(ordered([*runs, *typed([("x", other)])]))] == [
        (0, 1),
        (3, 4),
    ]


def test_over_seeds_table_and_csv_match_numpy(tmp_path):

    runs = _seed_runs(tmp_path)
    outcome = compare(CompareConfig(inputs=sorted(runs.values()), out=tmp_path / "cmp"))
    assert (tmp_path / "cmp" / "comparison_by_seed.csv") in outcome.files
    md = outcome.report_md.read_text(encoding="utf-8")
    results = _results(runs)

    def values(vrn: float, kind: str, stat: str) -> np.ndarray:
        return np.array(
            [results[(s, vrn)]["layers"]["embedding"]["pairs"][kind][stat] for s in (1, 2, 3)]
        )

    after = "Over seeds, layer 'embedding'"
    for vrn, label in ((0.0, "simclr"), (3.0, "simclr +VRN3")):
        row = md_row(md, label, after=after)
        assert row[0] == "3: 1–3"
        xneg_std = values(vrn, "cross_view_negative", "std")
        assert row[3] == f"{fmt(float(xneg_std.mean()), 4)} ± {fmt(float(xneg_std.std(ddof=1)), 2)}"
        pos = values(vrn, "positive", "mean")
        assert row[1] == f"{fmt(float(pos.mean()), 4)} ± {fmt(float(pos.std(ddof=1)), 2)}"
    frame = pd.read_csv(tmp_path / "cmp" / "comparison_by_seed.csv")
    assert list(frame.group) == ["simclr", "simclr +VRN3"] and list(frame.n_seeds) == [3, 3]
    assert list(frame.seeds) == ["1 2 3", "1 2 3"]
    row = frame[frame.group == "simclr +VRN3"].iloc[0]
    ratio = values(3.0, "within_view_negative", "excessive_ratio")
    assert row.within_view_negative_excessive_ratio_mean == pytest.approx(ratio.mean(), rel=1e-15)
    assert row.within_view_negative_excessive_ratio_std == pytest.approx(
        ratio.std(ddof=1), rel=1e-15
    )
    xneg_mean = values(3.0, "cross_view_negative", "mean")
    assert row.cross_view_negative_mean_std == pytest.approx(xneg_mean.std(ddof=1), rel=1e-15)
    # accuracies over seeds: make_result's accuracy depends on VRN, not on the seed -> std 0
    top1 = results[(1, 3.0)]["probes"]["linear"]["top1"]
    # mean ± sd over the seeds and the t interval of the mean (sd 0: the interval is the mean)
    assert (
        md_row(md, "simclr +VRN3", after="Probes over seeds")[1]
        == f"{100 * top1:.2f} ± 0.00 % [{100 * top1:.2f}, {100 * top1:.2f}]"
    )
    assert row.linear_top1_mean == pytest.approx(top1, rel=1e-15) and row.linear_top1_std == 0.0


def test_seed_groups_pool_the_overlay_and_the_threshold_caption(tmp_path):
    from cl_diag.report.comparison.frame import _pooled_histograms
    from cl_diag.report.runs import ordered, seed_groups

    runs = _seed_runs(tmp_path)
    outcome = compare(CompareConfig(inputs=sorted(runs.values()), out=tmp_path / "cmp"))
    md = outcome.report_md.read_text(encoding="utf-8")
    caption = md[md.index("*Negative-similarity densities") :].splitlines()[0]
    assert "one curve per seed group" in caption and "n_ref = 4: δ = -0.3333" in caption
    # δ = -1/3 is far from 0: the caption must not say it sits at 0
    assert "visually at 0" not in caption and "strictly left of it" in caption
    pairs = ordered([(runs[k].as_posix(), load(runs[k] / "result.json")) for k in runs])
    group = seed_groups(pairs)[1]
    pooled = _pooled_histograms(pairs, group, "embedding")
    assert pooled is not None
    expected = sum(
        np.asarray(pairs[i][1].layers["embedding"].pairs["cross_view_negative"].histogram.counts)
        for i in group.members
    )
    assert pooled["cross_view_negative"].counts == expected.tolist()
    assert sum(expected) == 3 * 4 * 3  # three seeds of n(n-1) = 12 pairs


def test_no_seed_csv_without_seed_groups(grid):
    root, _, outcome = grid
    assert not (root / "cmp" / "comparison_by_seed.csv").exists()
    assert "Over seeds" not in outcome.report_md.read_text(encoding="utf-8")


# ---- stale files ---------------------------------------------------------------------------------


def test_rerender_removes_only_its_own_stale_files(tmp_path):
    two = [write_run(tmp_path, f"two/b{b}", make_result(n=20, batch_size=b)) for b in (32, 64)]
    one = [
        write_run(tmp_path, f"one/b{b}", make_result(n=20, batch_size=b, layers=("embedding",)))
        for b in (32, 64)
    ]
    out = tmp_path / "cmp"
    compare(CompareConfig(inputs=two, out=out))
    assert (out / "negatives_projector.svg").exists()
    (out / "notes.txt").write_text("mine")
    (out / "mine.svg").write_text("<svg/>")
    outcome = compare(CompareConfig(inputs=one, out=out))
    names = sorted(p.name for p in out.iterdir())
    # the two-layer figures are gone; the user's files stay
    assert names == sorted([p.name for p in outcome.files] + ["notes.txt", "mine.svg"])
    assert "negatives_projector.svg" not in names and "negatives_embedding.svg" in names


def test_staged_output_prunes_only_files_it_proves_it_wrote(tmp_path):
    """Issue 11: a listing proves ownership only by the seal of a file's current content; a
    planted list of names, an entry outside the folder or a folder in its place remove nothing.
    Issue 26: nor does a listing of plain SHA-256 hashes (what sha256sum prints), nor the real
    seals of files that lack cl-diag's mark. Issue 35: nor the real seal of a marked copy (a
    file cl-diag did not move there itself, which lacks its extended attribute)."""
    import hashlib

    from cl_diag.io.output import OWNED_FILES, seal, staged_output

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def marked(text: str) -> str:  # an SVG that begins as cl-diag's figures do
        return (
            '<?xml version="1.0" encoding="utf-8"?>\n <metadata>\n    <dc:creator>\n'
            f"     <cc:Agent>\n      <dc:title>cl-diag</dc:title>\n{text}\n"
        )

    def sealed(text: str, name: str) -> str:
        path = tmp_path / "sealed"
        path.write_text(text)
        return seal(path, name) or ""

    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("keep")
    (out / "sub" / "x").write_text("keep")
    (out / "old.svg").write_text(marked("stale"))
    (out / "mine.svg").write_text("<svg>mine</svg>")
    (out / "folder.svg").mkdir()
    # the listing of earlier versions (bare names) proves nothing
    (out / OWNED_FILES).write_text("../outside.txt\nsub/x\nold.svg\nfolder.svg\n..\n")
    with staged_output(out, kind="analysis") as staging:
        (staging / "new.svg").write_text("new")
    assert (tmp_path / "outside.txt").read_text() == "keep"
    assert (out / "sub" / "x").read_text() == "keep" and (out / "folder.svg").is_dir()
    assert (out / "old.svg").read_text() == marked("stale")
    assert (out / "new.svg").read_text() == "new"
    (out / "new.svg").write_text(marked("new"))  # as if cl-diag's own figure
    # plain hashes that match the files prove nothing either
    (out / OWNED_FILES).write_text(
        "# cl-diag: the files it wrote in this folder, as <sha256>  <name>. Do not edit.\n"
        f"{sha(marked('stale'))}  old.svg\n{sha(marked('new'))}  new.svg\n"
    )
    with staged_output(out, kind="analysis") as staging:
        (staging / "other.svg").write_text("other")
    assert (out / "old.svg").exists() and (out / "new.svg").exists()
    # what cl-diag moved there itself (listed, marked and tagged) is pruned once not written
    # again; a marked copy with its real seal planted in the listing, and a user's unmarked
    # file, are not; unsafe names and mismatching seals are ignored
    for name in ("old.svg", "new.svg"):
        (out / name).unlink()
    with staged_output(out, kind="analysis") as staging:
        (staging / "old.svg").write_text(marked("stale"))
        (staging / "new.svg").write_text(marked("new"))
    (out / "copy.svg").write_bytes((out / "old.svg").read_bytes())  # the user's copy
    listing = (out / OWNED_FILES).read_text()
    (out / OWNED_FILES).write_text(
        listing
        + f"{sealed(marked('stale'), 'copy.svg')}  copy.svg\n"
        + f"{sealed('<svg>mine</svg>', 'mine.svg')}  mine.svg\n"
        + f"{sealed('other', 'sub/x')}  sub/x\n"
        + f"{sealed('keep', '../outside.txt')}  ../outside.txt\n"
    )
    with staged_output(out, kind="analysis") as staging:
        (staging / "result.json").write_text("{}")
    assert (tmp_path / "outside.txt").read_text() == "keep" and (out / "sub" / "x").exists()
    assert not (out / "old.svg").exists() and not (out / "new.svg").exists()
    assert (out / "copy.svg").read_text() == marked("stale")
    # the real seal of a file without cl-diag's mark proves nothing: the user's figure stays
    assert (out / "mine.svg").read_text() == "<svg>mine</svg>"
    assert (out / "result.json").read_text() == "{}"
    assert (out / OWNED_FILES).read_text().splitlines()[1:] == [
        f"{sealed('{}', 'result.json')}  result.json"
    ]
