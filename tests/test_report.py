"""Reports of one run: content, conventions, self-contained HTML, byte reproducibility.

``make_result`` builds a schema-valid result dict (docs/result-schema.md) from
synthetic similarity samples, so every statistic in it is consistent with its
histogram; tests/test_compare.py imports it too.
"""

from __future__ import annotations

import base64
import copy
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from cl_diag.report import render_analysis
from cl_diag.report.document import fmt, pct
from cl_diag.report.figures import MAX_DISPLAY_BINS, Density
from cl_diag.result import Result

QUANTILES = (1, 5, 25, 50, 75, 95, 99)


def _stats(samples: np.ndarray, *, threshold: float | None, bins: int, estimate: bool) -> dict:
    counts, _ = np.histogram(samples, bins=bins, range=(-1.0, 1.0))
    out = {
        "count": int(samples.size),
        "estimate": estimate,
        "mean": float(samples.mean()),
        "var": float(samples.var()),
        "std": float(samples.std()),
        "min": float(samples.min()),
        "max": float(samples.max()),
        "quantiles": {str(q): float(np.percentile(samples, q)) for q in QUANTILES},
        "quantile_error": 0.0 if estimate else 2.0 / bins,
        "histogram": {"range": [-1.0, 1.0], "bins": bins, "counts": counts.tolist()},
    }
    if threshold is not None:
        below = int((samples < threshold).sum())
        out["excessive_ratio"] = below / samples.size
        out["excessive_count"] = below
    return out


def make_result(
    *,
    n: int = 60,
    d: int = 128,
    batch_size: int | None = 32,
    vrn: float = 0.0,
    temperature: float | None = 0.2,
    loss: str = "simclr",
    n_ref: int | None = None,
    labels: bool = True,
    probes: bool = True,
    theory: bool = True,
    layers: tuple[str, ...] = ("projector", "backbone"),
    mode: str = "exact",
    bins: int = 100,
    seed: int = 0,
    config: dict | None = None,
) -> dict:
    """A plausible result: smaller batches -> larger negative variance, VRN lowers it (paper Table
    1)."""
    n_ref = n if n_ref is None else n_ref
    threshold = -1.0 / (n_ref - 1)
    m = batch_size or 128
    rng = np.random.default_rng([seed, m, int(vrn * 10), int((temperature or 0) * 100)])
    neg_std = float(np.sqrt((0.09 + 2.0 / m) * (0.6 if vrn > 0 else 1.0)))
    estimate = mode == "sampled"
    layer_dicts = {}
    for k, name in enumerate(layers):
        count = n * (n - 1)
        pos = np.clip(1.0 - np.abs(rng.normal(0.08, 0.06, n)), -1.0, 1.0)
        xneg = np.clip(rng.normal(-0.002, neg_std, count), -1.0, 1.0)
        wneg = np.clip(rng.normal(-0.001, neg_std * 1.05, count), -1.0, 1.0)
        pairs = {
            "positive": _stats(pos, threshold=None, bins=bins, estimate=estimate),
            "cross_view_negative": _stats(xneg, threshold=threshold, bins=bins, estimate=estimate),
            "within_view_negative": _stats(wneg, threshold=threshold, bins=bins, estimate=estimate),
        }
        if labels:
            for kind, samples in (("cross_view_negative", xneg), ("within_view_negative", wneg)):
                same = np.zeros(samples.size, dtype=bool)
                same[::10] = True  # 10 classes: about a tenth of the negatives share the class
                pairs[kind]["by_class"] = {
                    "same_class": _stats(
                        samples[same] + 0.3 * (1 - samples[same]) * 0.5,
                        threshold=threshold,
                        bins=bins,
                        estimate=estimate,
                    ),
                    "different_class": _stats(
                        samples[~same], threshold=threshold, bins=bins, estimate=estimate
                    ),
                }
        pos_mean, xneg_mean = pairs["positive"]["mean"], pairs["cross_view_negative"]["mean"]
        width = d if k == 0 else 4 * d
        spectrum = (0.5 ** np.arange(min(width, 40))).tolist()
        ceiling = 1.0 + xneg_mean + 1.0 / (n_ref - 1)
        layer_dicts[name] = {
            "n": n,
            "d": width,
            "pairs": pairs,
            "geometry": {
                "alignment": 2.0 - 2.0 * pos_mean,
                "uniformity": {
                    "u": 2.0 * (xneg_mean + neg_std**2 - 1.0),
                    "v": 2.0 * (xneg_mean + neg_std**2 - 1.0) - 0.01,
                },
                "effective_rank": {"u": 0.3 * width, "v": 0.31 * width, "epsilon": 1e-7},
                "spectrum": {"u": spectrum, "v": spectrum},
                "frontier_gap": xneg_mean - ((n - 2) * pos_mean - n) / (2 * (n - 1)),
                "alignment_ceiling": {"value": ceiling, "below_one": ceiling < 1.0},
            },
        }
    result = {
        "schema": "cl-diag/result/1",
        "tool": {"name": "cl-diag", "version": "0.1.0"},
        "source": {
            "kind": "checkpoint",
            "path": f"runs/{loss}-b{batch_size}/last.pt",
            "sha256": "ab" * 32,
        },
        "n_ref": n_ref,
        "threshold": threshold,
        "mode": mode,
        "num_pairs": 5000 if estimate else None,
        "seed": seed,
        "conventions": {
            "similarity": "cosine similarity of L2-normalised rows",
            "variance": "population variance (ddof 0)",
        },
        "config": (
            config
            if config is not None
            else {
                "loss": loss,
                "batch_size": batch_size,
                "temperature": temperature,
                "vrn": vrn,
                "epochs": 5,
                "seed": seed,
            }
        ),
        "layers": layer_dicts,
    }
    if probes:
        acc = 0.80 - 0.5 / m + (0.02 if vrn > 0 else 0.0) - 0.05 * abs((temperature or 0.2) - 0.3)
        base = {
            "linear": {"top1": 0.42, "top5": 0.81},
            "knn": {"k20": {"top1": 0.38}, "k200": {"top1": 0.36}},
            "clustering": {"nmi": 0.21, "ari": 0.08},
        }
        result["probes"] = {
            "layer": "backbone",
            "linear": {
                "top1": acc,
                "top5": min(1.0, acc + 0.12),
                "weight_decay": 1e-4,
                "settings": {"normalisation": "l2 per row", "weight_decay_grid": [0.01, 0.0001]},
            },
            "knn": {
                "k20": {"top1": acc - 0.03},
                "k200": {"top1": acc - 0.05},
                "settings": {"temperature": 0.07},
            },
            "retrieval": {
                name: {"recall_at_1": 0.5, "recall_at_5": 0.75, "recall_at_10": 0.875}
                for name in layers
            },
            "clustering": {"nmi": 0.55, "ari": 0.4, "settings": {"k": 10}},
            "baselines": {"raw_pixels": copy.deepcopy(base), "random_init": copy.deepcopy(base)},
        }
    if theory:
        from cl_diag.measurement.theory import variance_band

        lo, hi = variance_band(n_ref, min(m, n_ref))
        result["theory"] = {
            "n_ref": n_ref,
            "batch_size": batch_size,
            "loss": {"name": loss, "family": "info_nce", "c1": 1.0, "c2": 1.0},
            "theorem": "5.1(i)",
            "statement": "The full-batch optimum is the simplex ETF.",
            "predicted": {"positive_mean": 1.0, "negative_mean": threshold},
            "variance_band": {"n": n_ref, "m": m, "lo": lo, "hi": hi},
            "within_batch_optimum": -1.0 / (m - 1),
            "sigmoid": None,
        }
    return result


def md_row(text: str, first_cell: str, after: str = "") -> list[str]:
    """Cells of the first Markdown table row starting with ``first_cell`` after the text
    ``after``."""
    start = text.index(after) if after else 0
    escaped = first_cell.replace("|", "\\|")
    for line in text[start:].splitlines():
        if line.startswith(f"| {escaped} |"):
            cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
            return [c.strip().replace("\\|", "|") for c in cells][1:]
    raise AssertionError(f"no row {first_cell!r} after {after!r}")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    result = make_result(n=50, n_ref=50000, d=128)
    out = tmp_path_factory.mktemp("report")
    paths = render_analysis(Result.from_dict(result), out)
    return result, out, paths


def test_writes_reports_and_figures(rendered):
    _, out, paths = rendered
    names = [p.name for p in paths]
    assert names[:3] == ["report.md", "report.html", "result.csv"]
    figures = {
        "similarities_projector.svg",
        "similarities_backbone.svg",
        "spectrum_projector.svg",
        "spectrum_backbone.svg",
        "band_batch_size.svg",  # Thm 5.5's band against the batch size, the run's m starred
    }
    assert set(names[3:]) == figures
    # the report's files only: the record of what the tool owns is staged_output's (issue 11)
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    md = (out / "report.md").read_text(encoding="utf-8")
    for name in names[3:]:  # every figure is shown
        assert f"]({name})" in md


def test_header_prints_threshold_and_conventions(rendered):
    _, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    # -1/(50000-1) = -2.00004e-05, printed with the reports' 4 significant digits
    assert "δ = −1/(n_ref − 1) = -2e-05 with n_ref = 50000" in md
    assert md_row(md, "mode") == ["exact: all pairs, streamed in row blocks"]
    assert md_row(md, "layer 'projector'") == ["n = 50, d = 128"]
    assert md_row(md, "layer 'backbone'") == ["n = 50, d = 512"]
    assert "cosine similarity of L2-normalised rows" in md
    assert md_row(md, "variance") == ["population variance (ddof 0)"]  # the conventions block


def test_pair_table_holds_the_stored_numbers():
    result = make_result(
        n=40, labels=False, probes=False, theory=False, layers=("embedding",), config={}
    )
    pairs = result["layers"]["embedding"]["pairs"]
    # hand-set values: the table must print exactly these
    pairs["positive"].update(mean=0.75, var=0.0625, std=0.25, min=-0.5, max=1.0, count=40)
    pairs["cross_view_negative"].update(
        mean=-0.0125, var=0.1649, excessive_ratio=0.5731, excessive_count=894, count=1560
    )
    pairs["within_view_negative"]["quantiles"]["50"] = -0.03125
    out_md = _render_md(result)
    assert md_row(out_md, "which pairs") == [
        "(u_i, v_i), n pairs",
        "(u_i, v_j), i ≠ j, n(n−1) ordered",
        "(u_i, u_j) and (v_i, v_j), i < j, n(n−1)",
    ]
    assert md_row(out_md, "count") == ["40", "1560", str(pairs["within_view_negative"]["count"])]
    assert md_row(out_md, "mean")[:2] == ["0.75", "-0.0125"]
    assert md_row(out_md, "var (population, ddof 0)")[:2] == ["0.0625", "0.1649"]
    assert md_row(out_md, "std (ddof 0)")[0] == "0.25"
    assert md_row(out_md, "min")[0] == "-0.5"
    assert md_row(out_md, "quantile 50 %")[2] == "-0.03125"
    # the ratio is not defined for positives
    assert md_row(out_md, "excessive ratio (s < δ)")[:2] == ["—", "0.5731"]
    assert md_row(out_md, "excessive count (s < δ)")[1] == "894"
    assert md_row(out_md, "quantile error bound (|reported − exact|)") == ["0.02", "0.02", "0.02"]
    assert md_row(out_md, "exact / sampled") == ["exact"] * 3
    # an embeddings result has none of the checkpoint blocks
    for absent in ("## Probes", "## Theory panel", "## Training config", "same class"):
        assert absent not in out_md


def test_sampled_mode_is_labelled_an_estimate():
    result = make_result(
        n=30, mode="sampled", labels=False, probes=False, theory=False, layers=("embedding",)
    )
    md = _render_md(result)
    assert md_row(md, "mode") == [
        "sampled: 5000 pairs of each type drawn uniformly with seed 0 (estimates)"
    ]
    assert md_row(md, "exact / sampled") == ["sampled estimate"] * 3
    assert md_row(md, "quantile error bound (|reported − exact|)") == ["0", "0", "0"]


def test_by_class_split_when_labels_given(rendered):
    result, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    split = result["layers"]["projector"]["pairs"]["cross_view_negative"]["by_class"]
    row = md_row(md, "mean", after="Negatives split by class label")
    assert row[0] == fmt(split["same_class"]["mean"])
    assert row[1] == fmt(split["different_class"]["mean"])
    header = next(
        line
        for line in md[md.index("Negatives split by class label") :].splitlines()
        if line.startswith("| statistic")
    )
    assert (
        "cross-view negative, same class" in header
        and "within-view negative, different class" in header
    )


def test_geometry_block(rendered):
    result, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    geo = result["layers"]["projector"]["geometry"]
    after = "### Geometry of 'projector'"
    assert md_row(md, "alignment", after)[0] == fmt(geo["alignment"])
    assert md_row(md, "effective rank, view u", after)[0] == fmt(geo["effective_rank"]["u"])
    assert "ε = 1e-07" in md_row(md, "effective rank, view u", after)[1]
    assert md_row(md, "covariance spectrum, view u", after)[0] == "1, 0.5, 0.25, 0.125, 0.0625, …"
    assert md_row(md, "alignment ceiling", after)[0] == fmt(geo["alignment_ceiling"]["value"])


@pytest.mark.slow
def test_ceiling_below_one_is_flagged_only_beyond_its_sampling_error():
    # issue 12: the ceiling uses the sample's mean negative; 0.97 is below 1 by less than that
    # mean's sampling error when the negatives spread widely over n = 30 rows (var ~ 0.15:
    # margin 1.96 sqrt(2 var / n) ~ 0.2), and by more when they barely spread (var 1e-4)
    result = make_result(n=30, labels=False, probes=False, theory=False, layers=("embedding",))
    result["layers"]["embedding"]["geometry"]["alignment_ceiling"] = {
        "value": 0.97,
        "below_one": True,
    }
    assert "below 1 beyond its sampling error" not in _render_md(result)
    result["layers"]["embedding"]["pairs"]["cross_view_negative"]["var"] = 1e-4
    md = _render_md(result)
    margin = 1.959963984540054 * (2 * 1e-4 / 30) ** 0.5
    assert (
        f"The Theorem 5.2 alignment ceiling (0.97) is below 1 beyond its sampling error "
        f"(± {fmt(margin, 2)} at 95 %)" in md
    )
    # issue 32: at a simplex ETF the negatives do not spread and the ceiling is 1 up to float
    # residue; a ceiling within ε = EXCESS_MARGIN of 1 is not called below 1
    result["layers"]["embedding"]["pairs"]["cross_view_negative"]["var"] = 0.0
    result["layers"]["embedding"]["geometry"]["alignment_ceiling"]["value"] = 1 - 5e-4
    assert "below 1 beyond its sampling error" not in _render_md(result)
    result["layers"]["embedding"]["geometry"]["alignment_ceiling"]["value"] = 1 - 2e-3
    assert "below 1 beyond its sampling error (± 0.001 at 95 %)" in _render_md(result)


def test_non_negative_features_explain_a_zero_excessive_ratio():
    result = make_result(n=30, labels=False, probes=False, theory=False, layers=("embedding",))
    assert "are non-negative" not in _render_md(result)
    result["layers"]["embedding"]["pairs"]["cross_view_negative"].update(
        min=0.0125, excessive_ratio=0.0, excessive_count=0
    )
    md = _render_md(result)
    assert "Every cross-view negative similarity of 'embedding' is ≥ 0 (minimum 0.0125)" in md
    assert "the excessive ratios are 0 by construction" in md


def test_probe_table_in_percent_with_baselines(rendered):
    result, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    top1 = result["probes"]["linear"]["top1"]
    assert md_row(md, "linear probe top-1") == [pct(top1), "42.00 %", "42.00 %"]
    assert md_row(md, "kNN top-1, k = 200") == [
        pct(result["probes"]["knn"]["k200"]["top1"]),
        "36.00 %",
        "36.00 %",
    ]
    assert md_row(md, "retrieval of the positive, projector, Recall@10") == ["87.50 %", "—", "—"]
    assert md_row(md, "k-means NMI") == ["0.55", "0.21", "0.21"]
    assert md_row(md, "linear", after="Probe settings") == ["weight_decay (chosen)", "0.0001"]
    assert md_row(md, "knn", after="Probe settings") == ["temperature", "0.07"]


def test_theory_panel_predicted_next_to_measured(rendered):
    result, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    band = result["theory"]["variance_band"]
    after = "Layer 'projector' (d = 128)."
    row = md_row(md, "cross-view negative variance", after)
    assert row[0] == f"[{fmt(band['lo'])}, {fmt(band['hi'])}]"
    assert row[1] == fmt(result["layers"]["projector"]["pairs"]["cross_view_negative"]["var"])
    # 1/d for d = 128 is 0.0078125
    assert md_row(md, "variance of random unit vectors", after)[0] == "0.007812"
    assert md_row(md, "cross-view negative mean", after)[0] == "-2e-05"
    assert md_row(md, "within-batch negative (per-batch simplex)", after)[0] == fmt(-1 / 31)
    # d = 128 < n_ref - 1 = 49999: the caveat, once per layer
    assert md.count("Validity: d = 128 < n_ref − 1 = 49999") == 1
    assert md.count("Validity: d = 512 < n_ref − 1 = 49999") == 1


def test_theory_band_hand_values_and_no_caveat_when_simplex_fits():
    # Fig. 2 of the paper: n = 4, m = 2 gives the band [2/9, 8/9]; d = 3 >= n - 1
    result = make_result(
        n=4, n_ref=4, d=3, batch_size=2, labels=False, probes=False, layers=("embedding",)
    )
    md = _render_md(result)
    assert md_row(md, "cross-view negative variance")[0] == "[0.2222, 0.8889]"
    assert "Validity:" not in md


def test_sigmoid_theory_rows():
    result = make_result(n=30, loss="sigmoid", labels=False, probes=False, layers=("embedding",))
    result["theory"]["sigmoid"] = {
        "t": 1.0,
        "b": -1.0,
        "eq10": {"lhs": 0.163, "rhs": 24999.0, "holds": True},
        "ccem": {"N": 32, "x_star": 0.759, "s_pos": 0.518, "s_neg": -0.349, "regime": "interior"},
    }
    md = _render_md(result)
    assert "= 0.163 vs (n−2)/2 = 24999: holds, excessive separation predicted (Thm 5.3)" in md
    assert md_row(md, "positive mean (CCEM, N = m)")[0] == "0.518"
    assert md_row(md, "negative mean (CCEM, N = m)")[0] == "-0.349"


def test_config_block(rendered):
    _, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md_row(md, "batch_size", after="## Training config") == ["32"]
    assert md_row(md, "temperature", after="## Training config") == ["0.2"]


def test_distribution_caption_says_threshold_is_visually_at_zero(rendered):
    _, out, _ = rendered
    md = (out / "report.md").read_text(encoding="utf-8")
    assert (
        "δ = −1/(n_ref − 1) = -2e-05 with n_ref = 50000; at this scale it sits visually at 0." in md
    )


def test_html_is_self_contained(rendered):
    _, out, paths = rendered
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "@import" not in html and "url(" not in html
    # a link into the page itself (the contents: href="#findings") loads nothing
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", html), (
        "every resource must be inline"
    )
    anchors = re.findall(r'href="#([^"]+)"', html)
    assert anchors and all(f'id="{a}"' in html for a in anchors)
    images = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)
    svgs = [p for p in paths if p.suffix == ".svg"]
    assert len(images) == len(svgs) == html.count("<img")
    assert sorted(base64.b64decode(i) for i in images) == sorted(p.read_bytes() for p in svgs)
    assert html.count("<table>") == (out / "report.md").read_text(encoding="utf-8").count("\n|---")


def test_svg_figures_are_valid_and_undated(rendered):
    _, _, paths = rendered
    for path in paths:
        if path.suffix != ".svg":
            continue
        root = ET.fromstring(path.read_bytes())
        assert root.tag.endswith("svg") and root.get("width", "").endswith("pt")
        text = path.read_text(encoding="utf-8")
        assert "<dc:date>" not in text and "Matplotlib v" not in text


@pytest.mark.slow
def test_byte_identical_reruns_and_isolated_from_global_style(tmp_path):
    result = make_result(n=40, n_ref=1000)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    render_analysis(Result.from_dict(result), first)
    with matplotlib.rc_context(
        {"font.size": 20, "svg.hashsalt": None, "axes.grid": False, "lines.linewidth": 4}
    ):
        render_analysis(Result.from_dict(copy.deepcopy(result)), second)
    files = sorted(p.name for p in first.iterdir())
    assert files == sorted(p.name for p in second.iterdir())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_density_rebins_fine_histograms():
    counts = np.zeros(1000, dtype=int)
    counts[500:505] = [1, 2, 3, 4, 5]  # bins 500..504 cover [0, 0.01)
    dens = Density.from_histogram({"range": [-1.0, 1.0], "bins": 1000, "counts": counts.tolist()})
    assert dens.density.size == MAX_DISPLAY_BINS  # 1000 bins in groups of 5
    widths = np.diff(dens.edges)
    assert np.allclose(widths, 0.01)
    assert np.sum(dens.density * widths) == pytest.approx(1.0)
    # all 15 counts fall in the group [0, 0.01): density 15 / (15 * 0.01) = 100
    assert dens.density[100] == pytest.approx(100.0)
    assert dens.edges[100] == pytest.approx(0.0)
    assert Density.from_histogram({"range": [-1.0, 1.0], "bins": 3, "counts": [0, 0, 0]}) is None


def _render_md(result: dict) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        render_analysis(Result.from_dict(result), Path(tmp))
        return (Path(tmp) / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_theory_predictions_only_for_the_loss_layer():
    result = make_result(n=50, n_ref=50000, d=128, labels=False, probes=False)
    result["theory"]["loss_layer"] = "projector"
    md = _render_md(result)
    assert "measured (projector)" in md and "measured (backbone)" not in md
    assert (
        "Layer 'projector' (d = 128): the layer the loss sees, which the theorems describe." in md
    )
    layers = result["layers"]
    after = "Context only: 'backbone' measured beside 'projector'"
    assert md_row(md, "cross-view negative variance", after) == [
        fmt(layers["projector"]["pairs"]["cross_view_negative"]["var"]),
        fmt(layers["backbone"]["pairs"]["cross_view_negative"]["var"]),
    ]
    # d = 128 and d = 512: 1/d
    assert md_row(md, "1/d (random unit vectors)", after) == ["0.007812", "0.001953"]
    header = next(
        line for line in md[md.index(after) :].splitlines() if line.startswith("| measured")
    )
    assert header == "| measured | projector (loss layer) | backbone (context only) |"
    # the validity caveat belongs to the loss layer only
    assert md.count("Validity:") == 1


def test_raw_pixel_retrieval_is_the_baseline_of_every_layer():
    result = make_result(n=30, labels=False, theory=False)
    result["probes"]["baselines"]["raw_pixels"]["retrieval"] = {
        "pixels": {"recall_at_1": 0.0625, "recall_at_5": 0.125, "recall_at_10": 0.25}
    }
    result["probes"]["baselines"]["random_init"]["retrieval"] = {
        "projector": {"recall_at_1": 0.03125, "recall_at_5": 0.1, "recall_at_10": 0.2}
    }
    md = _render_md(result)
    assert md_row(md, "retrieval of the positive, projector, Recall@1") == [
        "50.00 %",
        "6.25 %",
        "3.12 %",
    ]
    assert md_row(md, "retrieval of the positive, backbone, Recall@10") == [
        "87.50 %",
        "25.00 %",
        "—",
    ]
    assert "raw-pixel retrieval compares the two views' pixels directly" in md


def test_header_renders_the_checkpoint_source():
    result = make_result(n=30, labels=False, probes=False, theory=False)
    result["source"].update(
        format="solo-learn",
        arch="resnet18",
        dataset="cifar10",
        n_train=50000,
        epoch=399,
        step=78000,
        complete=True,
        cifar_stem_padding={"value": 2, "from": "default for upstream solo-learn checkpoints"},
        provenance={"arch": "args.json"},
        versions={"torch": "2.4.0"},
        views={
            "num_images": 256,
            "pool": 50000,
            "sampling": "uniform",
            "augmentation": "the training augmentation, twice",
            "mode": "eval",
            "amp": False,
        },
        note="read as cifar10",
    )
    md = _render_md(result)
    assert md_row(md, "checkpoint format") == ["solo-learn"]
    assert md_row(md, "architecture") == ["resnet18 (from args.json)"]
    assert md_row(md, "dataset") == ["cifar10, 50000 training images"]
    assert md_row(md, "checkpoint taken at") == ["epoch 399, step 78000 (run complete)"]
    assert md_row(md, "CIFAR stem padding") == ["2 (default for upstream solo-learn checkpoints)"]
    assert md_row(md, "two views") == [
        "256 of 50000 training images; uniform; the training augmentation, twice; eval; float32, "
        "no AMP"
    ]
    assert md_row(md, "trained with") == ["torch 2.4.0"]
    assert md_row(md, "note") == ["read as cifar10"]
    assert md_row(md, "seed")[0].startswith("0 (of this analysis: image sample, augmentations")


def test_a_numeric_cell_breaks_between_its_pieces_only():
    # a narrow window wraps "mean ± sd [lo, hi]" between its pieces, never inside "98.44 %"
    from cl_diag.report.html import _td

    assert _td("98.44 %") == '<td class="num">98.44 %</td>'
    assert _td("0.5 ± 0.1 [0.4, 0.6] (n = 3)") == (
        '<td class="num parts"><span>0.5</span> <span>± 0.1</span> <span>[0.4, 0.6]</span> '
        "<span>(n = 3)</span></td>"
    )
    assert _td("−0.2 [−0.3, −0.1]") == (
        '<td class="num parts"><span>−0.2</span> <span>[−0.3, −0.1]</span></td>'
    )
