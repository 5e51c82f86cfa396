"""The committed reference report reports/toy-vrn/ is what its command produces: the same bytes
under an equal environment fingerprint, and statistically the same results under another
(the guarantee of docs/reproducibility.md)."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pytest

from cl_diag.result import load

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "reports" / "toy-vrn"
# The command in reports/toy-vrn/README.md, run from the repository root.
COMMAND = [
    "sweep",
    "trainers/rebuttal-toy.toml",
    "--grid",
    "seed=1,2,3,4,5",
    "--grid",
    "vrn=0,3",
    "--out",
    "reports/toy-vrn",
    "--quiet",
]
NOT_COMMITTED = {"last.pt", "metrics.csv", "sweep.log"}  # reports/.gitignore


def _committed_files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.name not in NOT_COMMITTED and p.name != "README.md"
    )


def _environments(root: Path) -> list[object]:
    return [
        (r.environment, r.source.environment)
        for r in (load(p) for p in sorted(root.glob("*/analysis/result.json")))
    ]


@pytest.mark.slow
def test_toy_vrn_reference_report_regenerates(run_cli, tmp_path, monkeypatch):
    # Same relative paths as the README's command, so paths recorded in the results match.
    (tmp_path / "trainers").mkdir()
    shutil.copy(REPO / "trainers" / "rebuttal-toy.toml", tmp_path / "trainers")
    monkeypatch.chdir(tmp_path)
    result = run_cli(*COMMAND)
    assert result.code == 0, result.err
    made = tmp_path / "reports" / "toy-vrn"

    expected = _committed_files(TOY)
    regenerated = _committed_files(made)
    # 10 cells x (result.json, 2 reports, 2 figures) + the comparison and its provenance.json
    assert len(expected) >= 10 * 5 + 5 and (Path("comparison") / "provenance.json") in expected
    assert regenerated == expected
    if _environments(made) == _environments(TOY):
        # an equal fingerprint promises the same bytes, every file
        for relative in expected:
            assert (made / relative).read_bytes() == (TOY / relative).read_bytes(), relative
    else:
        # another environment: the results agree within replicate noise (cl-diag reproduce's
        # check), and their fingerprints tell the two environments apart
        from cl_diag.report.reproduction import check_reproduction

        names = sorted(p.parent.parent.name for p in TOY.glob("*/analysis/result.json"))
        original = [(n, load(TOY / n / "analysis" / "result.json")) for n in names]
        again = [load(made / n / "analysis" / "result.json") for n in names]
        assert check_reproduction(original, again).reproduced


def _quote_findings():
    """tools/quote_findings.py, loaded from its file (tools/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "quote_findings", REPO / "tools" / "quote_findings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("folder", ["toy-vrn", "digits-batch-study", "supcl-collapse"])
def test_reference_readmes_quote_the_generated_findings(folder):
    # issue 12: the READMEs quote the findings the tool wrote, never a paraphrase of them
    tool = _quote_findings()
    root = REPO / "reports" / folder
    generated = tool.generated(root / "comparison" / "report.md")
    assert len(generated) >= 5
    assert tool.quoted(root / "README.md") == generated


@pytest.mark.parametrize("folder", ["toy-vrn", "digits-batch-study", "supcl-collapse"])
def test_reference_readmes_give_the_reproduction_and_the_fingerprint(folder):
    # issue 22: the command that checks the report, the fingerprint it was made under (quoted
    # from its results) and the guarantee
    from cl_diag.report.environment import GUARANTEE

    tool = _quote_findings()
    root = REPO / "reports" / folder
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert f"cl-diag reproduce reports/{folder}" in readme
    assert " ".join(GUARANTEE.split()) in " ".join(readme.split())
    lines = tool.fingerprint(root)
    assert tool.quoted_fingerprint(root / "README.md") == lines
    assert any(line.startswith("`cpu.aten_capability`: ") for line in lines)


# ---- every committed report is a pure function of the committed results -------------------

STUDIES = ("toy-vrn", "digits-batch-study", "supcl-collapse")
#: one analysis of each kind of run (toy, digits with and without VRN, supcl collapsed and not)
#: renders in the fast lane; the others are marked slow (about a second each: the figures)
REPRESENTATIVE = {
    "toy-vrn/seed=1_vrn=0",
    "toy-vrn/seed=1_vrn=3",
    "digits-batch-study/batch-size=16_vrn=0_seed=1",
    "digits-batch-study/batch-size=16_vrn=30_seed=1",
    "supcl-collapse/alpha=0_seed=1",
    "supcl-collapse/alpha=0.25_seed=1",
    "supcl-collapse/alpha=1_seed=1",
}
ANALYSES = [
    pytest.param(
        path,
        id=run,
        marks=() if run in REPRESENTATIVE else pytest.mark.slow,
    )
    for path in sorted(REPO.glob("reports/*/*/analysis/result.json"))
    for run in [path.parent.parent.relative_to(REPO / "reports").as_posix()]
]


def _left_out(study: Path, name: str) -> bool:
    """Whether the study's .gitignore leaves a per-run analysis file out of the repository
    (a study that keeps the repository small commits report.md, not report.html or figures)."""
    ignore = study / ".gitignore"
    if not ignore.is_file():
        return False
    patterns = [
        line.strip()
        for line in ignore.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return any(fnmatch.fnmatch(f"run/analysis/{name}", p) for p in patterns)


@pytest.mark.parametrize("path", ANALYSES)
def test_committed_analysis_reports_render_byte_identical(path, tmp_path):
    # report.md, report.html and the figures of each committed analysis, rendered again from its
    # committed result.json alone (issue 20: refactoring the reports changes no byte); files
    # the study's .gitignore leaves out are rendered but not compared
    from cl_diag.report import render_analysis
    from cl_diag.result import load

    study = path.parent.parent.parent
    written = [p for p in render_analysis(load(path), tmp_path) if not _left_out(study, p.name)]
    committed = sorted(
        p.name
        for p in path.parent.iterdir()
        if p.is_file() and p.name != "result.json" and not _left_out(study, p.name)
    )
    assert sorted(p.name for p in written) == [n for n in committed if not n.startswith(".")]
    assert "report.md" in committed
    for file in written:
        assert file.read_bytes() == (path.parent / file.name).read_bytes(), file.name


@pytest.mark.parametrize("study", STUDIES)
def test_committed_comparisons_render_byte_identical(study, tmp_path, monkeypatch):
    # each study's comparison, made again by `cl-diag compare` from the committed results, run
    # from a copy of the repository's reports/ so that the recorded run names and links match
    from cl_diag.orchestration.compare import CompareConfig, compare

    source = REPO / "reports" / study
    copy = tmp_path / "reports" / study
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("comparison"))
    monkeypatch.chdir(tmp_path)
    inputs = sorted(
        Path("reports", study, p.parent.parent.name, "analysis")
        for p in source.glob("*/analysis/result.json")
    )
    # the sweep that made the runs, as the comparison recorded it (provenance.json)
    recorded = json.loads((source / "comparison" / "provenance.json").read_text(encoding="utf-8"))
    compare(
        CompareConfig(
            inputs=inputs, out=Path("reports", study, "comparison"), sweep=recorded["sweep"]
        )
    )
    expected = sorted(p.name for p in (source / "comparison").iterdir())
    assert sorted(p.name for p in (copy / "comparison").iterdir()) == expected
    for name in expected:
        if name.startswith("."):
            continue  # the listing of cl-diag's own files (hashes of the same bytes)
        assert (copy / "comparison" / name).read_bytes() == (
            source / "comparison" / name
        ).read_bytes(), name
