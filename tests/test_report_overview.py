"""Issue 24 item 6: reports whose first screen says it.

The headline (verdict counts computed from the findings, the numbers that matter, the figure
that carries them), the contents, the collapsed appendix of probe internals, readable labels and
``--label``, long table cells that wrap instead of squeezing their neighbours, legends beside the
axes, the 2-D view of each layer (PCA always, UMAP only when installed), and the first screen of
each report kind in a real browser.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from test_report import make_result

from cl_diag.report.claims import Finding
from cl_diag.report.document import Details, Table
from cl_diag.report.overview import APPENDIX, verdict_line
from cl_diag.report.runs import unique_labels
from cl_diag.result import Result
from cl_diag.runconfig import RunConfig

# ---- the headline ------------------------------------------------------------------------------


def test_verdict_line_counts_every_kind():
    findings = [
        Finding("a", "r1", "prediction", "supported"),
        Finding("a", "r2", "prediction", "supported"),
        Finding("b", "r1", "prediction", "inconclusive"),
        Finding("b", "r2", "prediction", "not borne out"),
        Finding("c", "r1", "prediction", "not applicable"),
        Finding("d", "r1", "description", None),
        Finding("e", "r1", "consistency", "holds"),
        Finding("f", "r1", "consistency", "violated"),
    ]
    assert verdict_line(findings) == (
        "Findings: 2 supported, 1 not borne out, 0 contradicted, 1 inconclusive, 1 not "
        "applicable (predictions of the registry); 1 described without a verdict; consistency "
        "checks: 1 of 2 hold."
    )
    assert verdict_line([]) == "Findings: no claim of the registry (docs/claims.md) applies."


def _headline_rows(md: str) -> dict[str, str]:
    """The headline table of a report.md: its first table, first column -> second."""
    head = md[: md.index("**Contents**")]
    rows = [line for line in head.splitlines() if line.startswith("| ")][1:]
    return {r.split(" | ")[0][2:]: r.split(" | ")[1].rstrip(" |") for r in rows}


def test_analysis_opens_with_headline_contents_then_sections(tmp_path):
    from cl_diag.report import render_analysis
    from cl_diag.report.analysis import analysis_findings

    data = make_result(n=50, n_ref=1000, d=16)
    result = Result.from_dict(data)
    render_analysis(result, tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    findings = analysis_findings(result, RunConfig.of(result))
    assert any(f.kind == "prediction" for f in findings)
    # the verdict counts are the evaluator's, counted independently here
    counts = {
        v: sum(f.verdict == v for f in findings if f.kind == "prediction")
        for v in ("supported", "contradicted", "inconclusive", "not applicable")
    }
    line = md.splitlines()[2]
    for verdict, count in counts.items():
        assert f"{count} {verdict}" in line
    # the numbers of the loss layer (projector), read from the result
    neg = data["layers"]["projector"]["pairs"]["cross_view_negative"]
    pos = data["layers"]["projector"]["pairs"]["positive"]
    rows = _headline_rows(md)
    assert rows["positive mean (alignment)"] == f"{pos['mean']:.4g}"
    assert rows["cross-view negative mean"] == f"{neg['mean']:.4g}"
    assert rows["cross-view negative std"] == f"{neg['std']:.4g}"
    assert rows["excessive separation (share below δ)"] == f"{100 * neg['excessive_ratio']:.2f} %"
    best = max(data["probes"]["linear"]["top1"], data["probes"]["knn"]["k20"]["top1"])
    assert any(
        k.startswith("best probe accuracy") and v.startswith(f"{100 * best:.2f} %")
        for k, v in rows.items()
    )
    # the loss layer's similarity figure is the headline's, once in the page
    assert md.index("](similarities_projector.svg)") < md.index("**Contents**")
    assert md.count("](similarities_projector.svg)") == 1
    # contents list every level-2 section after them, linked by GitHub's anchors
    assert "- [Findings](#findings)" in md and "- [Run](#run)" in md
    assert f"- [{APPENDIX}](#appendix-probe-internals-and-fit-diagnostics)" in md
    assert md.index("**Contents**") < md.index("## Findings") < md.index("## Run")


def test_headline_counts_excessive_separation_beyond_float_residue(tmp_path):
    # issue 32: a simplex ETF (every negative at δ up to float32 residue) is not excessively
    # separated; the strict count says 0-100 % by rounding, the headline reads below δ − ε
    import numpy as np

    from cl_diag.api import measure
    from cl_diag.report import render_analysis

    n = 8
    q = np.eye(n) - 1.0 / n
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    result = measure(q, q, probes="none")
    cross = result.layers["embedding"].pairs["cross_view_negative"]
    assert cross.excessive_margin_count == 0 and cross.count == n * (n - 1)
    render_analysis(result, tmp_path)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    rows = _headline_rows(md)
    assert rows["excessive separation (share below δ − 0.001)"] == "0.00 %"
    assert "excessive separation (share below δ)" not in rows
    assert "| excessive ratio (s < δ − 0.001) | — | 0 | 0 |" in md


@pytest.mark.slow
def test_probe_internals_sit_in_the_collapsed_appendix(tmp_path):
    from cl_diag.report import render_analysis
    from cl_diag.report.analysis import build_analysis

    data = make_result(n=50, n_ref=1000, d=16)
    data["probes"]["linear"]["settings"]["fits"] = {
        "1e-05": {"iterations": 31, "line_trials": 40, "stop": "gradient"}
    }
    result = Result.from_dict(data)
    doc = build_analysis(result)
    (appendix,) = [b for b in doc.blocks if isinstance(b, Details) and b.summary == APPENDIX]
    rows = [r[1] for b in appendix.blocks if isinstance(b, Table) for r in b.rows]
    assert "fits.1e-05.line_trials" in rows and "weight_decay_grid" in rows
    # nowhere else; the appendix comes before the environment, after every open section
    outside = [r[1] for b in doc.blocks if isinstance(b, Table) for r in b.rows if len(r) > 1]
    assert "fits.1e-05.line_trials" not in outside
    titles = [i for i, b in enumerate(doc.blocks) if isinstance(b, Details)]
    assert doc.blocks[titles[0]].summary == APPENDIX  # type: ignore[union-attr]
    assert titles == list(range(titles[0], len(doc.blocks)))  # the environment's after it
    render_analysis(result, tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    start = page.index('<details id="appendix-probe-internals-and-fit-diagnostics">')
    assert start < page.index("fits.1e-05.line_trials") < page.index("</details>", start)
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert md.index(f"## {APPENDIX}") < md.index("fits.1e-05.line_trials")
    assert md.index("## Probes") < md.index("## Training config") < md.index(f"## {APPENDIX}")


# ---- labels ------------------------------------------------------------------------------------


def _config(**options) -> RunConfig:
    from cl_diag.runconfig import parse_run_config

    return parse_run_config(options)


def test_labels_of_runs_with_and_without_a_config():
    full = dict(loss="simclr", batch_size=64, temperature=0.2, lr=1.0, epochs=40, dim=128)
    names = ["runs/simclr/analysis", "emb/a", "emb/b"]
    labels = unique_labels(names, [_config(**full), _config(), _config()])
    # never the whole config: a config run alone among config-less ones is named by its loss
    assert labels == ["simclr", "a", "b"]
    # options that differ between the runs that have a config, and only those
    other = dict(full, batch_size=32)
    labels = unique_labels(
        ["x/analysis", "y/analysis", "emb/a"], [_config(**full), _config(**other), _config()]
    )
    assert labels == ["simclr b64", "simclr b32", "a"]
    # config-less runs in folders named alike: the shortest unique trailing parts
    labels = unique_labels(["one/analysis", "two/analysis"], [_config(), _config()])
    assert labels == ["one", "two"]
    labels = unique_labels(["a/one/x.json", "b/one/x.json"], [_config(), _config()])
    assert labels == ["a/one/x.json", "b/one/x.json"]
    # given labels win; a given label another run has as well is made unique by the folder
    labels = unique_labels(
        ["x/analysis", "emb/a", "emb/b"],
        [_config(**full), _config(), _config()],
        ["b", None, None],
    )
    assert labels == ["b [x]", "a", "b"]


def _write(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_compare_label_option(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "batch-size=16" / "analysis", make_result(n=40, batch_size=16))
    _write(tmp_path / "emb" / "analysis", make_result(n=40, config={}, theory=False))
    _write(tmp_path / "other" / "analysis", make_result(n=40, config={}, theory=False, seed=3))
    out = run_cli(
        "compare",
        "batch-size=16/analysis",
        "emb/analysis",
        "other/analysis",
        "--out",
        "cmp",
        "--label",
        "batch-size=16/analysis=trained",
        "--label",
        "emb/analysis=CLIP image",
    )
    assert out.code == 0, out.err
    assert "trained  batch-size=16/analysis" in out.out
    assert "CLIP image  emb/analysis" in out.out
    assert "other  other/analysis" in out.out  # a run without a config: by its folder
    md = (tmp_path / "cmp" / "report.md").read_text(encoding="utf-8")
    assert "| trained (baseline)" not in md and "| trained | batch-size=16/analysis |" in md
    assert "| CLIP image | emb/analysis |" in md
    for bad, words in (
        (["--label", "nowhere=x"], "nowhere is not one of the runs compared"),
        (["--label", "emb/analysis"], "is not DIR=NAME"),
        (["--label", "emb/analysis=a", "--label", "other/analysis=a"], "more than one run"),
    ):
        refused = run_cli("compare", "emb/analysis", "other/analysis", "--out", "c2", *bad)
        assert refused.code == 2 and words in refused.err, refused.err
        assert not (tmp_path / "c2").exists()


# ---- tables and legends ------------------------------------------------------------------------


def test_long_cells_wrap_in_a_column_of_their_own():
    from cl_diag.report.html import render_fragment

    long = "simclr b16 " + " ".join(f"option{i}=value" for i in range(30))
    page = render_fragment([Table(columns=["runs", "why"], rows=[[long, "short"]])])
    assert f'<td class="long">{long}</td>' in page and "<td>short</td>" in page
    from cl_diag.report.html import _CSS

    rule = re.search(r"td\.long \{([^}]*)\}", _CSS)
    assert rule and "white-space: normal" in rule.group(1) and "min-width" in rule.group(1)
    # after the rule that keeps a first column on one line, so that it wins
    assert _CSS.index("td:first-child") < _CSS.index("td.long")


def test_legends_never_cover_the_data(monkeypatch):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from cl_diag.report import figures
    from cl_diag.result import Histogram, Spectrum

    drawn = []
    real = figures.to_svg
    monkeypatch.setattr(figures, "to_svg", lambda fig: drawn.append(fig) or real(fig))
    counts = [0] * 40 + [5, 30, 80, 30, 5] + [0] * 55
    hist = {
        kind: Histogram(range=[-1.0, 1.0], bins=100, counts=counts) for kind in figures.PAIR_NAMES
    }
    assert figures.similarity_distributions(hist, [(1000, -0.001)], "projector")
    assert figures.spectrum(Spectrum(u=[3.0, 2.0, 1.0], v=[2.5, 1.5, 0.5]), "projector")
    assert len(drawn) == 2
    for fig in drawn:
        renderer = FigureCanvasAgg(fig).get_renderer()
        legends = 0
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            legends += 1
            box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert box.x0 >= area.x1, "the legend overlaps its axes"
            assert box.x1 <= fig.bbox.x1 + 0.5, "the legend is cut off at the figure's edge"
        assert legends == len(fig.axes)


# ---- the 2-D view ------------------------------------------------------------------------------


def test_pca_matches_scikit_learn_with_fixed_signs():
    from sklearn.decomposition import PCA

    from cl_diag.measurement.projection import pca_2d

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 12)) @ rng.normal(size=(12, 12))
    coords, shares = pca_2d(x)
    reference = PCA(n_components=2, svd_solver="full").fit(x)
    expected = reference.transform(x)
    for k in range(2):
        sign = np.sign(coords[:, k] @ expected[:, k])
        np.testing.assert_allclose(coords[:, k], sign * expected[:, k], atol=1e-9)
        axis = sign * reference.components_[k]
        assert axis[np.argmax(np.abs(axis))] > 0  # the sign rule: the largest loading positive
    np.testing.assert_allclose(shares, reference.explained_variance_ratio_, rtol=1e-12)
    # the same data with its rows reordered: the same axes (signs included)
    order = rng.permutation(200)
    again, _ = pca_2d(x[order])
    np.testing.assert_allclose(again, coords[order], atol=1e-9)


def test_projection_sample_is_bounded_seeded_and_shared():
    import torch

    from cl_diag.measurement.projection import MAX_POINTS, projections_of, sample_rows

    rows = sample_rows(2000, seed=5)
    assert len(rows) == MAX_POINTS == len(set(rows.tolist()))
    assert torch.equal(rows, torch.sort(rows).values) and torch.equal(rows, sample_rows(2000, 5))
    assert not torch.equal(rows, sample_rows(2000, 6))
    assert torch.equal(sample_rows(300, 5), torch.arange(300))
    # millions of rows (moments mode): distinct, in range, seeded, without an O(n) permutation
    big = sample_rows(10_000_000, seed=5)
    assert len(set(big.tolist())) == MAX_POINTS and 0 <= int(big.min()) < int(big.max()) < 10**7
    assert torch.equal(big, sample_rows(10_000_000, seed=5))
    u = torch.nn.functional.normalize(
        torch.randn(900, 8, generator=torch.Generator().manual_seed(1)), dim=1
    )
    codes = torch.arange(900) % 7
    (pca,) = projections_of(u, codes, seed=5).values()
    assert pca.method == "pca" and len(pca.x) == len(pca.y) == len(pca.rows) == MAX_POINTS
    assert pca.classes == [r % 7 for r in pca.rows]


def test_measured_layers_carry_pca_and_the_report_draws_it(tmp_path):
    import cl_diag
    from cl_diag.report import analysis_files

    rng = np.random.default_rng(3)
    centres = rng.normal(size=(4, 16)) * 3
    labels = np.repeat(np.arange(4), 60)
    z1 = centres[labels] + rng.normal(size=(240, 16))
    z2 = z1 + 0.1 * rng.normal(size=(240, 16))
    result = cl_diag.measure(z1, z2, labels=labels)
    views = result.layers["embedding"].projections
    assert views is not None and set(views) <= {"pca", "umap"} and "pca" in views
    pca = views["pca"]
    assert pca.rows == list(range(240)) and pca.classes == labels.tolist()
    # the PCA of the normalised first view, recomputed here
    u = z1.astype(np.float32) / np.linalg.norm(z1.astype(np.float32), axis=1, keepdims=True)
    centred = u.astype(np.float64) - u.astype(np.float64).mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    first = centred @ vt[0]
    assert abs(abs(np.corrcoef(first, pca.x)[0, 1]) - 1.0) < 1e-6
    assert pca.explained == pytest.approx(list(s[:2] ** 2 / np.sum(s**2)), abs=2e-6)
    files = dict(analysis_files(result))
    assert "embedding2d_embedding.svg" in files
    assert "](embedding2d_embedding.svg)" in files["report.md"].decode()
    # deterministic bytes: measured and drawn again
    again = dict(analysis_files(cl_diag.measure(z1, z2, labels=labels)))
    assert again == files
    if "umap" not in views:
        assert "umap" not in sys.modules  # never imported when not installed


def test_umap_is_used_when_installed(monkeypatch):
    import importlib.util

    import torch

    from cl_diag.measurement import projection

    calls = []

    class UMAP:  # a stand-in with umap-learn's interface: records how it was called
        def __init__(self, **kwargs):
            calls.append(kwargs)

        def fit_transform(self, x):
            return np.asarray(x)[:, :2] * 2.0

    fake = types.ModuleType("umap")
    fake.UMAP = UMAP  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "umap", fake)
    real_find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "umap" else real_find(name, *a),
    )
    u = torch.nn.functional.normalize(
        torch.randn(50, 4, generator=torch.Generator().manual_seed(2)), dim=1
    )
    views = projection.projections_of(u, None, seed=9)
    assert list(views) == ["pca", "umap"]
    assert calls == [
        {"n_components": 2, "n_neighbors": 15, "metric": "cosine", "random_state": 9, "n_jobs": 1}
    ]
    assert views["umap"].x == [round(float(v) * 2.0, 6) + 0.0 for v in u[:, 0].double()]
    assert views["umap"].classes is None
    # too few points for UMAP's neighbourhoods: PCA only
    assert list(projection.projections_of(u[:10], None, seed=9)) == ["pca"]


def test_umap_is_an_optional_extra():
    import tomllib

    project = tomllib.loads(
        (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    assert project["optional-dependencies"]["umap"] == ["umap-learn>=0.5"]
    assert not any(d.startswith("umap") for d in project["dependencies"])


# ---- the first screen, in a real browser --------------------------------------------------------

_SLOW = pytest.mark.slow
CHROMIUM = (
    "/usr/bin/chromium"
    if Path("/usr/bin/chromium").exists()
    else shutil.which("chromium") or shutil.which("chromium-browser")
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1280,900",
]
#: the first screen of a 1280 x 900 window
SCREEN = 900
#: written into a copy of the page: once loaded, where the headline's parts lie on the page
MEASURE = """<script>
window.addEventListener('load', function () {
  function box(sel) {
    var el = document.querySelector(sel);
    if (!el) { return null; }
    var r = el.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, height: r.height};
  }
  var out = {headline: box('#headline'), verdicts: box('#headline .verdicts'),
             numbers: box('#headline table'), figure: box('#headline figure img'),
             contents: box('nav.contents'), findings: box('#findings'),
             first: document.querySelector('main').firstElementChild.tagName,
             width: window.innerWidth};
  var pre = document.createElement('pre');
  pre.id = 'cl-diag-measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _first_screen(page: Path, tmp_path: Path) -> dict:
    from PIL import Image

    shot = tmp_path / f"{page.parent.name}-first-screen.png"
    taken = _browser(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == (1280, SCREEN)
        # the headline's frame (#d0d7de) is drawn on the first screen
        assert (0xD0, 0xD7, 0xDE) in {c[:3] for _, c in image.convert("RGB").getcolors(1 << 20)}
    copy = tmp_path / f"{page.parent.name}-measured" / "report.html"
    copy.parent.mkdir()
    copy.write_text(
        page.read_text(encoding="utf-8").replace("</body>", MEASURE + "\n</body>", 1),
        encoding="utf-8",
    )
    dumped = _browser(tmp_path, "--virtual-time-budget=5000", "--dump-dom", copy.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    found = re.search(r'<pre id="cl-diag-measure">(.*?)</pre>', dumped.stdout, re.S)
    assert found, "the page did not finish loading"
    return json.loads(htmllib.unescape(found.group(1)))


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it",
)
def test_first_screen_of_each_report_kind_shows_the_headline(tmp_path):
    from cl_diag.orchestration.compare import CompareConfig, compare
    from cl_diag.report import render_analysis

    single = tmp_path / "single"
    single.mkdir()
    render_analysis(Result.from_dict(make_result(n=50, n_ref=1000, d=16)), single)
    runs = [
        _write(tmp_path / f"b{m}s{s}" / "analysis", make_result(n=40, batch_size=m, seed=s))
        for m in (16, 32)
        for s in (1, 2)
    ]
    runs.append(_write(tmp_path / "emb" / "analysis", make_result(n=40, config={}, theory=False)))
    compared = compare(CompareConfig(inputs=runs, out=tmp_path / "comparison"))
    for page in (single / "report.html", compared.report_html):
        seen = _first_screen(page, tmp_path)
        # the page is laid out at the screenshot's width (no height-dependent CSS), so its
        # positions on the page are those of the 1280 x 900 screenshot
        assert seen["width"] == 1280
        assert seen["first"] == "H1"
        for part in ("headline", "verdicts", "numbers"):
            box = seen[part]
            assert box is not None and box["height"] > 0, part
            assert box["bottom"] <= SCREEN, f"{part} of {page} ends below the first screen: {box}"
        assert seen["figure"] is not None and seen["figure"]["top"] < SCREEN
        # the contents follow the headline; the sections follow the contents
        assert seen["headline"]["bottom"] <= seen["contents"]["top"] < seen["findings"]["top"]


#: written into a copy of a page: once loaded, how far each table runs past its box
TABLE_WIDTHS = """<script>
window.addEventListener('load', function () {
  var out = [];
  document.querySelectorAll('.table-wrap').forEach(function (wrap) {
    var table = wrap.querySelector('table'), caption = table.querySelector('caption');
    out.push({over: table.scrollWidth - wrap.clientWidth,
              caption: caption ? caption.textContent.slice(0, 60) : ''});
  });
  var pre = document.createElement('pre');
  pre.id = 'cl-diag-measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
REPO = Path(__file__).resolve().parents[1]
COMMITTED_PAGES = [
    *sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("reports/**/comparison/report.html")),
    "reports/toy-vrn/seed=1_vrn=3/analysis/report.html",
]


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it",
)
@pytest.mark.parametrize(
    "page",
    [
        pytest.param(
            p, marks=() if p == "reports/digits-batch-study/comparison/report.html" else _SLOW
        )
        for p in COMMITTED_PAGES
    ],
)
def test_every_table_of_the_reference_reports_fits_a_1280_px_window(page, tmp_path):
    # issue 37: a reader of a 1280-px window sees each table whole (the Findings' nine columns
    # included), without scrolling it sideways
    copy = tmp_path / "report.html"
    text = (REPO / page).read_text(encoding="utf-8")
    copy.write_text(text.replace("</body>", TABLE_WIDTHS + "\n</body>", 1), encoding="utf-8")
    dumped = _browser(tmp_path, "--virtual-time-budget=5000", "--dump-dom", copy.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    found = re.search(r'<pre id="cl-diag-measure">(.*?)</pre>', dumped.stdout, re.S)
    assert found, "the page did not finish loading"
    tables = json.loads(htmllib.unescape(found.group(1)))
    assert len(tables) >= 5
    assert [t for t in tables if t["over"] > 0] == []


def test_the_real_umap_is_seeded_quiet_and_reproducible():
    # where the optional extra is installed (pip install "cl-diag[umap]"); checked by hand with
    # umap-learn 0.5.12
    pytest.importorskip("umap")
    import warnings

    from cl_diag.measurement import projection

    x = np.random.default_rng(3).normal(size=(60, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # umap-learn's seeded-fit warning must not reach a user
        a = projection.umap_2d(x, seed=4)
    b = projection.umap_2d(x, seed=4)
    assert a is not None and a.shape == (60, 2) and np.array_equal(a, b)
