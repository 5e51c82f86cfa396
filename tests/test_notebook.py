"""cl-diag in a notebook (issue 24, item 4): a result's short form (``repr``, ``_repr_html_``),
``compare`` of results and paths alike, the API taking the command line's words, and a public
namespace that shows the API only."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cl_diag
from cl_diag.errors import UserError
from cl_diag.options import PYTHON
from cl_diag.orchestration.analysis_config import PROBES, option_names
from cl_diag.report.document import fmt
from cl_diag.result import LAYERS, KnnProbe, KnnScore, LinearProbe, Probes, Source
from cl_diag.vocabulary import PairType

ROOT = Path(__file__).resolve().parents[1]
CROSS, WITHIN = PairType.CROSS_VIEW_NEGATIVE, PairType.WITHIN_VIEW_NEGATIVE


def _result(n: int = 80, d: int = 12, noise: float = 0.5, seed: int = 0) -> cl_diag.Result:
    rng = np.random.default_rng(seed)
    z1 = rng.standard_normal((n, d))
    return cl_diag.measure(z1, z1 + noise * rng.standard_normal((n, d)), np.arange(n) % 4)


@pytest.fixture(scope="module")
def result() -> cl_diag.Result:
    return _result()


def test_repr_is_a_few_lines_with_what_was_measured_and_the_headline_numbers(result):
    text = repr(result)
    assert str(result) == text  # print(res) shows the same
    # the whole result is ~20,000 characters; labelled rows add the linear and kNN probes' lines
    assert len(text) < 1200 and len(text.splitlines()) <= 17
    assert "kNN k=20 top-1" in text
    assert len(result.to_json()) > 10 * len(text)
    layer = result.layers["embedding"]
    lines = text.splitlines()
    assert lines[0].startswith(f"cl-diag Result: arrays sha256 {result.source.sha256[:12]}")
    assert "exact pairs" in lines[0] and f"n_ref 80, δ = {fmt(result.delta)}" in lines[0]
    assert lines[1].split() == ["embedding"]
    assert lines[2].split() == ["n", "×", "d", "80", "×", "12"]
    shown = {line[:28].strip(): line[28:].strip() for line in lines[3:10]}
    assert shown == {
        "positive mean": fmt(layer.pairs[PairType.POSITIVE].mean),
        "cross-view neg. mean": fmt(layer.pairs[CROSS].mean),
        "cross-view neg. var": fmt(layer.pairs[CROSS].var),
        "cross-view excessive ratio": fmt(layer.pairs[CROSS].excessive_ratio),
        "within-view neg. mean": fmt(layer.pairs[WITHIN].mean),
        "within-view neg. var": fmt(layer.pairs[WITHIN].var),
        "within-view excessive ratio": fmt(layer.pairs[WITHIN].excessive_ratio),
    }
    assert "share of a negative type's similarities below δ" in text
    # the labelled rows' probes: their line shows the probe's own number
    linear = next(line for line in lines if line.startswith("linear top-1"))
    assert linear.split()[-2:] == [f"{100 * result.probes.linear.top1:.2f}", "%"]
    # the same result read back from its file prints the same
    assert repr(result.from_dict(result.to_dict())) == text


def test_repr_shows_the_probe_accuracies_in_the_probed_layer(result):
    probed = dataclasses.replace(
        result,
        probes=Probes(
            layer="embedding",
            linear=LinearProbe(top1=0.8123, top5=0.99),
            knn=KnnProbe(scores={20: KnnScore(top1=0.75), 200: KnnScore(top1=None)}),
        ),
    )
    rows = {line[:28].strip(): line[28:].strip() for line in repr(probed).splitlines()}
    assert rows["linear top-1"] == "81.23 %"
    assert rows["kNN k=20 top-1"] == "75.00 %"
    assert "kNN k=200 top-1" not in rows  # not measured: no row


def test_repr_html_is_the_escaped_headline_table(result):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>.npz'
    named = dataclasses.replace(result, source=Source(kind="embeddings", path=evil))
    html = named._repr_html_()
    assert "<table>" in html and '<th scope="col">embedding</th>' in html
    layer = result.layers["embedding"]
    for value in (layer.pairs[PairType.POSITIVE].mean, layer.pairs[CROSS].var):
        assert f'<td class="num">{fmt(value)}</td>' in html
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "<html" not in html and "<style" not in html  # a fragment for the notebook's page
    # in text, a file name stays on its line, and a long one keeps its end
    odd = dataclasses.replace(result, source=Source(kind="embeddings", path="a\nb/" + "x" * 90))
    first = repr(odd).splitlines()[0]
    assert first.startswith("cl-diag Result: embeddings …") and "xxxx;" in first
    assert "a\\nb" in repr(dataclasses.replace(odd, source=Source(kind="e", path="a\nb")))


def test_compare_takes_results_and_paths_alike(tmp_path, result):
    other = _result(noise=1.0, seed=1)
    other.save(tmp_path / "other")
    both = cl_diag.compare([result, other], out=tmp_path / "cmp")
    assert list(both.labels) == ["runs[0]", "runs[1]"]
    frame = both.frame.set_index("label")
    for name, res in (("runs[0]", result), ("runs[1]", other)):
        mean = res.layers["embedding"].pairs[PairType.POSITIVE].mean
        assert frame.loc[name, "embedding/positive_mean"] == pytest.approx(mean)
    mixed = cl_diag.compare([result, tmp_path / "other"], out=tmp_path / "cmp2")
    assert set(mixed.labels) == {"runs[0]", str(tmp_path / "other")}
    assert mixed.report_html.is_file()
    # cl-diag reproduce re-runs the folders provenance.json names: a result in memory has none
    assert not (tmp_path / "cmp2" / "provenance.json").exists()
    paths = cl_diag.compare([tmp_path / "other"], out=tmp_path / "cmp5")
    assert (paths.out / "provenance.json").is_file()
    # the same object twice is one run, as the same file named twice is
    once = cl_diag.compare([result, result, str(tmp_path / "other")], out=tmp_path / "c3")
    assert len(once.labels) == 2
    # a result as the baseline
    based = cl_diag.compare([tmp_path / "other"], baseline=result, out=tmp_path / "cmp4")
    assert list(based.labels) == ["baseline", str(tmp_path / "other")]  # the baseline leads
    text = repr(mixed)
    assert text.startswith(f"cl-diag comparison of 2 run(s): {mixed.report_html}")
    assert fmt(other.layers["embedding"].pairs[CROSS].var) in text
    assert fmt(result.layers["embedding"].pairs[CROSS].var) in text
    assert len(text) < 2000
    assert "<table>" in mixed._repr_html_()


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ([None], r"runs\[0\] is of type NoneType, not a run\. Give a cl_diag Result"),
        (["a", 3], r"runs\[1\] is of type int, not a run\. .*path \(str or pathlib\.Path\)"),
        ("a/result.json", r"takes a list of runs, not a str: compare\(\['a/result.json', \.\.\.\]"),
        (7, r"takes a list of runs, not a int"),
    ],
)
def test_compare_names_a_bad_run_and_what_it_takes(tmp_path, runs, message):
    with pytest.raises(UserError, match=message):
        cl_diag.compare(runs, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_compare_refuses_one_result_and_a_bad_baseline(tmp_path, result):
    with pytest.raises(UserError, match=r"not a Result: compare\(\[res, res2\], out=\.\.\.\)"):
        cl_diag.compare(result, out=tmp_path / "x")
    with pytest.raises(UserError, match=r"baseline is of type dict, not a run"):
        cl_diag.compare([result], baseline={}, out=tmp_path / "x")


@pytest.mark.parametrize(
    ("value", "allowed", "option", "none", "expected"),
    [
        ("none", PROBES, "probes", True, ()),
        (" None ", PROBES, "probes", True, ()),
        ("all", PROBES, "probes", True, PROBES),
        ("knn, Linear", PROBES, "probes", True, ("knn", "linear")),
        (["knn", "retrieval"], PROBES, "probes", True, ("knn", "retrieval")),
        ((), PROBES, "probes", True, ()),
        ("backbone", LAYERS, "layers", False, ("backbone",)),
        ("all", LAYERS, "layers", False, LAYERS),
    ],
)
def test_the_api_reads_the_command_lines_words(value, allowed, option, none, expected):
    assert option_names(value, allowed, option, none=none, spelling=PYTHON) == expected
    if isinstance(value, str):  # the command line reads the same words the same way
        assert option_names(value, allowed, option, none=none) == expected


@pytest.mark.parametrize(
    ("value", "option", "message"),
    [
        (
            "bogus",
            "probes",
            "probes='bogus': give 'all', 'none' or a comma-separated subset of linear, knn, "
            "retrieval, clustering (as a string, or a list of names).",
        ),
        (
            "none",
            "layers",
            "layers='none': give 'all' or a comma-separated subset of projector, backbone "
            "(as a string, or a list of names).",
        ),
        (["knn", 3], "probes", "probes=['knn', 3]: give 'all', 'none'"),
        (3, "probes", "probes=3: give 'all', 'none'"),
    ],
)
def test_a_bad_name_is_refused_with_the_valid_choices(value, option, message):
    allowed = PROBES if option == "probes" else LAYERS
    with pytest.raises(UserError) as caught:
        option_names(value, allowed, option, none=option == "probes", spelling=PYTHON)
    assert str(caught.value).startswith(message)


def test_the_cli_message_names_the_option_as_typed(run_cli, pairs_file, tmp_path):
    run = run_cli("analyze", str(pairs_file), "--out", str(tmp_path / "o"), "--probes", "bogus")
    assert run.code == 2
    assert "--probes 'bogus': give 'all', 'none' or a comma-separated subset of linear" in run.err


@pytest.mark.slow
def test_analyze_takes_probes_none_as_the_cli_does(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 12))
    outcome = cl_diag.analyze(
        encoder=encoder, dataset="digits", out=tmp_path / "a", num_images=16, probes="none"
    )
    probes = outcome.result.probes
    assert probes is None or (probes.linear, probes.knn, probes.clustering) == (None,) * 3
    # what cl_diag.analyze returns prints as its result does, with where it was written
    assert repr(outcome).startswith(repr(outcome.result) + f"\nwritten to {tmp_path / 'a'}")
    with pytest.raises(UserError, match=r"probes='knn,nope': give 'all', 'none'"):
        cl_diag.analyze(encoder=encoder, dataset="digits", out=tmp_path / "b", probes="knn,nope")


def test_the_namespace_is_the_public_api():
    names = dir(cl_diag)
    public = [n for n in names if not (n.startswith("__") and n.endswith("__"))]
    assert sorted(public) == sorted(n for n in cl_diag.__all__ if n != "__version__")
    for helper in ("Any", "TYPE_CHECKING", "importlib", "Path", "annotations", "result", "api"):
        assert helper not in names
    assert {"measure", "analyze", "compare", "load", "Result", "Monitor", "UserError"} <= set(
        cl_diag.__all__
    )


@pytest.mark.slow
def test_every_name_in_all_imports_in_a_fresh_interpreter():
    code = textwrap.dedent(
        """
        import cl_diag
        from cl_diag import *
        missing = [n for n in cl_diag.__all__ if n not in globals()]
        print(missing, cl_diag.UserError is cl_diag.errors.UserError)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["[] True"]


NOTEBOOK = """
import pathlib, sys
import torch
import cl_diag

out = pathlib.Path(sys.argv[1])
torch.manual_seed(0)
encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16))
projector = torch.nn.Linear(16, 8)
res = cl_diag.analyze(encoder=encoder, dataset="digits", out=out / "a", num_images=32,
                      probes="none")
res2 = cl_diag.analyze(encoder=encoder, projector=projector, dataset="digits", out=out / "b",
                       num_images=32, probes="knn", baselines=False, probe_train_images=64,
                       probe_test_images=32)
print(res2)
print("----")
print(cl_diag.compare([res, res2], out=out / "cmp"))
print("----")
print(cl_diag.compare([res.result, out / "b"], out=out / "cmp2"))
print("----")
print(cl_diag.compare([cl_diag.load(out / "a"), str(out / "b" / "result.json")], out=out / "c3"))
"""


@pytest.mark.slow
def test_a_notebook_analyses_and_compares_results_and_paths(tmp_path):
    """The notebook user's path: two analyses of a model on the embedded digits, printed, then
    compared as the objects ``cl_diag.analyze`` returned, as a result and a folder, and as a
    loaded result and a file."""
    run = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    shown, *comparisons = run.stdout.split("----\n")
    res2 = cl_diag.load(tmp_path / "b")
    assert shown.startswith(f"{res2!r}\nwritten to {tmp_path / 'b'} (")
    assert shown.strip().endswith(f"open {tmp_path / 'b' / 'report.html'}")
    assert "kNN k=20 top-1" in shown and "linear top-1" not in shown
    knn = res2.probes.knn.top1[20]
    assert f"{100 * knn:.2f} %" in shown
    first, second, third = comparisons
    assert "#1 a\n  #2 b\n" in first  # the folders analyze wrote name the runs
    for text in (second, third):  # a result in memory is named by its place, a file by its folder
        assert {"#1 b", "#2 runs[0]"} <= {line.strip() for line in text.splitlines()}
    for text in comparisons:
        assert text.startswith("cl-diag comparison of 2 run(s)")
        assert fmt(res2.layers["projector"].pairs[CROSS].var) in text
    res = cl_diag.load(tmp_path / "a")
    assert res.probes is None or res.probes.knn is None
    assert (tmp_path / "c3" / "comparison.csv").is_file()
