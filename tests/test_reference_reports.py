"""The committed reference report reports/toy-vrn/ is what its command produces: the same bytes
under an equal environment fingerprint, and statistically the same results under another
(the guarantee of docs/reproducibility.md); every reference study's README quotes its generated
findings and fingerprint, and its reports render again from its committed results."""

from __future__ import annotations

import json
import shutil
import subprocess
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
    "seed=1,2,3,4,5,6,7,8,9,10",
    "--grid",
    "vrn=0,3,30",
    "--plan",
    "plans/toy-vrn-v2.toml",
    "--out",
    "reports/toy-vrn",
    "--quiet",
]
NOT_COMMITTED = {"last.pt", "metrics.csv", "training_curves.svg", "sweep.log"}  # reports/.gitignore


def _committed_files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.name not in NOT_COMMITTED and p.name != "README.md"
    )


def test_the_toy_command_is_the_readmes():
    # the fast check of the slow regeneration below: it runs the README's command, and the
    # committed folder holds its 10 seeds x 3 arms (none, λ = 3, the paper's λ = 30)
    text = (TOY / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    assert "cl-diag " + " ".join(COMMAND[:-1]) in " ".join(text.split())
    cells = sorted(p.parent.parent.name for p in TOY.glob("*/analysis/result.json"))
    assert cells == sorted(f"seed={s}_vrn={v}" for s in range(1, 11) for v in (0, 3, 30))


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
    (tmp_path / "plans").mkdir()
    for name in ("toy-vrn-v2.toml", "toy-vrn-lambda30.md"):  # the plan the command records
        shutil.copy(REPO / "plans" / name, tmp_path / "plans")
    monkeypatch.chdir(tmp_path)
    result = run_cli(*COMMAND)
    assert result.code == 0, result.err
    made = tmp_path / "reports" / "toy-vrn"

    expected = _committed_files(TOY)
    regenerated = _committed_files(made)
    # 30 cells x (result.json, 2 reports, 2 figures) + the comparison and its provenance.json
    assert len(expected) >= 30 * 5 + 5 and (Path("comparison") / "provenance.json") in expected
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


#: every reference study: a folder with comparison/ and README.md (a study of two data sets has
#: one such folder per data set)
QUOTED = [
    "toy-vrn",
    "toy-vrn-converged",
    "digits-batch-study",
    "supcl-collapse",
    "supcl-collapse-free",
    "sigmoid-within-view/digits",
    "sigmoid-within-view/free",
    "ccem-sigmoid",
    "vrn-weight",
]


@pytest.mark.slow
def test_the_reports_index_tables_the_verdicts_the_registry_computes():
    # reports/README.md's verdict table is generated from the committed results (every study,
    # the VRN weight study's tuning sweep too), never written by hand
    tool = _quote_findings()
    folders = list(dict.fromkeys(REPO / "reports" / f for f in QUOTED))
    lines = tool.verdict_table(folders, REPO / "reports")
    readme = REPO / "reports" / "README.md"
    assert tool.quoted_table(readme) == lines
    names = {line.split(" | ")[0].removeprefix("| ") for line in lines[2:]}
    assert names == {f"`{f}/`" for f in QUOTED} | {"`vrn-weight/tuning/`"}
    # the main job's primary claims, as the README of the project reports them
    assert (
        "| `digits-batch-study/` | `vrn_variance`: VRN lowers the variance of cross-view "
        "negative similarities | **supported**: simclr b16: VRN 3 vs none, simclr b16: VRN 30 "
        "vs none, simclr b64: VRN 3 vs none, simclr b64: VRN 30 vs none |" in lines
    )
    assert tool.main(["--check", "--table", str(readme), *map(str, folders)]) == 0


def test_the_reports_index_says_which_studies_share_runs():
    # issue 33: studies that test the same claim hold no run in common (the main job, re-made on
    # seeds 11-16, once held 22 of the VRN weight study's runs); the index says so from the
    # results, and would name any pair that did
    tool = _quote_findings()
    folders = list(dict.fromkeys(REPO / "reports" / f for f in QUOTED))
    lines = tool.shared_runs(folders, REPO / "reports")
    assert tool.quoted_shared(REPO / "reports" / "README.md") == lines
    assert lines == ["no two studies share a run"]


def test_shared_runs_are_named(tmp_path):
    tool = _quote_findings()
    config = {"loss": "simclr", "seed": 1}
    for study, run in (("a", "x"), ("b", "y"), ("b", "z")):
        folder = tmp_path / study / run / "analysis"
        folder.mkdir(parents=True)
        other = dict(config, seed=2) if run == "z" else config
        (folder / "result.json").write_text(json.dumps({"config": other}), encoding="utf-8")
        (tmp_path / study / "comparison").mkdir(exist_ok=True)
    lines = tool.shared_runs([tmp_path / "a", tmp_path / "b"], tmp_path)
    assert len(lines) == 1 and lines[0].startswith("`a/` and `b/` share 1 of `a/`'s 1 runs")


@pytest.mark.parametrize("folder", QUOTED)
def test_reference_readmes_quote_the_generated_findings(folder):
    # issue 12: the READMEs quote the findings the tool wrote, never a paraphrase of them
    tool = _quote_findings()
    root = REPO / "reports" / folder
    generated = tool.generated(root / "comparison" / "report.md")
    assert len(generated) >= 5
    assert tool.quoted(root / "README.md") == generated


def test_the_vrn_weight_readme_quotes_the_nested_procedure():
    # issue 33 item 2: the tuned-λ procedure's gain (leave one seed out) and the stability of
    # its choice, quoted from the tuning comparison, one sentence per batch size
    tool = _quote_findings()
    root = REPO / "reports" / "vrn-weight"
    lines = tool.nested(root)
    assert [line.split(":")[0] for line in lines] == ["simclr b16", "simclr b64"]
    assert all("leave one seed out" in line and "stable" in line for line in lines)
    assert tool.quoted_nested(root / "README.md") == lines
    assert (root / "tuning" / "comparison" / "vrn_selection_stability.svg").is_file()


@pytest.mark.parametrize("folder", QUOTED)
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


def _repository_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that the repository keeps, committed or not, never what a
    .gitignore leaves out (a study's per-run HTML and figures); every file outside a git
    checkout."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "."],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return [p for p in folder.iterdir() if p.is_file()]
    return [folder / name for name in listed if "/" not in name]


STUDIES = (
    "toy-vrn",
    "toy-vrn-converged",
    "digits-batch-study",
    "supcl-collapse",
    "supcl-collapse-free",
    "sigmoid-within-view/digits",
    "sigmoid-within-view/free",
    "ccem-sigmoid",
)
#: studies that commit each run's result.json and report.md only: their .gitignore leaves out
#: the per-run report.html and figures (common size rule), which render from the result
LEAN = ("sigmoid-within-view",)
#: one analysis of each kind of run (toy, digits with and without VRN, supcl collapsed and not)
#: renders in the fast lane; the others are marked slow (about a second each: the figures)
REPRESENTATIVE = {
    "toy-vrn/seed=1_vrn=0",
    "toy-vrn/seed=1_vrn=3",
    "digits-batch-study/batch-size=16_vrn=0_seed=11",
    "digits-batch-study/batch-size=16_vrn=30_seed=11",
    "supcl-collapse/alpha=0_seed=1",
    "supcl-collapse/alpha=0.25_seed=1",
    "supcl-collapse/alpha=1_seed=1",
    "supcl-collapse-free/alpha=0.3_seed=1",
    "ccem-sigmoid/temperature=4_bias=2_seed=1",
    "toy-vrn-converged/seed=11_vrn=3",
    "sigmoid-within-view/digits/bias=-1_within-view=false_seed=1",
    "sigmoid-within-view/free/bias=-1_within-view=true_seed=1",
    "vrn-weight/tuning/batch-size=16_vrn=3_seed=1",
    "vrn-weight/test/batch-size=64_vrn=0_seed=6",
}


def _first_seeds(runs: list[str]) -> set[str]:
    """The runs of the lowest seed of each setting (a run's name without its seed=N part)."""
    first: dict[str, tuple[int, str]] = {}
    for run in runs:
        parts = run.split("_")
        seeds = [int(p[5:]) for p in parts if p.startswith("seed=")]
        setting = "_".join(p for p in parts if not p.startswith("seed="))
        seed = seeds[0] if seeds else 0
        if setting not in first or seed < first[setting][0]:
            first[setting] = (seed, run)
    return {run for _, run in first.values()}


_RUNS = sorted(
    p.parent.parent.relative_to(REPO / "reports").as_posix()
    for p in REPO.glob("reports/**/analysis/result.json")
)
#: every run of a study that commits its whole analyses (toy-vrn); of the studies whose
#: .gitignore leaves the per-run HTML and figures out (only report.md is compared), the first
#: seed of each setting: the other seeds' reports take the same code path on other numbers, and
#: rendering all 200 of them (figures included) cost the suite two minutes of its ten
RENDERED = {r for r in _RUNS if not (REPO / "reports" / r.split("/")[0] / ".gitignore").is_file()}
RENDERED |= _first_seeds(sorted(set(_RUNS) - RENDERED))
ANALYSES = [
    pytest.param(
        REPO / "reports" / run / "analysis" / "result.json",
        id=run,
        marks=() if run in REPRESENTATIVE else pytest.mark.slow,
    )
    for run in _RUNS
    if run in RENDERED
]


def test_the_rendered_runs_cover_every_setting_of_every_study():
    # each study and stage has at least one run rendered per setting, the fast lane's included
    assert REPRESENTATIVE <= RENDERED
    assert len(RENDERED) < len(_RUNS)
    settings = {"_".join(p for p in r.split("_") if not p.startswith("seed=")) for r in _RUNS}
    assert settings == {
        "_".join(p for p in r.split("_") if not p.startswith("seed=")) for r in RENDERED
    }


@pytest.mark.slow
@pytest.mark.parametrize("path", ANALYSES)
def test_committed_analysis_reports_render_byte_identical(path, tmp_path):
    # report.md, report.html and the figures of each committed analysis, rendered again from its
    # committed result.json alone (issue 20: refactoring the reports changes no byte); files
    # the study's .gitignore leaves out are rendered but not compared
    from cl_diag.report import render_analysis
    from cl_diag.result import load

    written = render_analysis(load(path), tmp_path)
    committed = sorted(
        p.name
        for p in _repository_files(path.parent)
        if p.name != "result.json" and not p.name.startswith(".")
    )
    # a study may leave its per-run HTML and figures out of the repository (its .gitignore:
    # they are rendered again from result.json); everything it keeps is rendered again here
    left_out = {p.name for p in written} - set(committed)
    assert all(n == "report.html" or n.endswith(".svg") for n in left_out), left_out
    assert set(committed) <= {p.name for p in written} and "report.md" in committed
    for file in written:
        if file.name in committed:
            assert file.read_bytes() == (path.parent / file.name).read_bytes(), file.name


@pytest.mark.parametrize("study", LEAN)
def test_lean_studies_leave_out_only_what_renders_from_the_results(study):
    # the size rule: each run's analysis/report.html and figures are ignored, its result.json
    # and report.md are not, nor is anything of comparison/
    text = (REPO / "reports" / study / ".gitignore").read_text(encoding="utf-8")
    ignore = [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]
    assert {"*/*/analysis/report.html", "*/*/analysis/*.svg"} <= set(ignore)
    assert not any("comparison" in line or "result.json" in line for line in ignore)


@pytest.mark.slow
@pytest.mark.parametrize("study", STUDIES)
def test_committed_comparisons_render_byte_identical(study, tmp_path, monkeypatch):
    # each study's comparison, made again by `cl-diag compare` from the committed results, run
    # from a copy of the repository's reports/ so that the recorded run names and links match
    from cl_diag.orchestration.compare import CompareConfig, compare, recorded_plan

    source = REPO / "reports" / study
    copy = tmp_path / "reports" / study
    shutil.copytree(
        source,
        copy,
        ignore=shutil.ignore_patterns("comparison", "*.pt", "metrics.csv", "sweep.log"),
    )
    monkeypatch.chdir(tmp_path)
    inputs = sorted(
        Path("reports", study, p.parent.parent.name, "analysis")
        for p in source.glob("*/analysis/result.json")
    )
    # the sweep that made the runs, as the comparison recorded it (provenance.json)
    recorded = json.loads((source / "comparison" / "provenance.json").read_text(encoding="utf-8"))
    compare(
        CompareConfig(
            inputs=inputs,
            out=Path("reports", study, "comparison"),
            sweep=recorded["sweep"],
            plan=recorded_plan(recorded),
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


@pytest.mark.parametrize("study", ["toy-vrn", "digits-batch-study"])
def test_each_analysis_csv_is_its_runs_rows_of_the_comparison_csv(study):
    # result.csv of each analysis: the rows comparison.csv gives that run, every column but the
    # label (a comparison labels runs by what differs between them) and the run (the folder
    # compared, against the file analysed), so single analyses concatenate without compare
    import pandas as pd

    home = REPO / "reports" / study
    together = pd.read_csv(home / "comparison" / "comparison.csv")
    for path in sorted(home.glob("*/analysis/result.csv")):
        alone = pd.read_csv(path)
        assert alone["run"].iloc[0] == path.parent.parent.relative_to(REPO).as_posix() + "/last.pt"
        rows = together[together["run"] == path.parent.relative_to(REPO).as_posix()]
        assert list(alone["layer"]) == list(rows["layer"]) and len(alone) >= 1
        columns = [c for c in together.columns if c not in ("label", "run")]
        assert list(alone.columns) == list(together.columns)
        pd.testing.assert_frame_equal(
            alone[columns].reset_index(drop=True), rows[columns].reset_index(drop=True)
        )


#: the comparisons of the VRN weight study: (folder of the runs, comparison folder), both under
#: reports/vrn-weight; the tuning sweep's records its sweep, the test stage's none (three
#: sweeps made its runs, tools/select_vrn.py compared them)
VRN_WEIGHT_COMPARISONS = (("tuning", "tuning/comparison"), ("test", "comparison"))


@pytest.mark.slow
@pytest.mark.parametrize(("runs", "folder"), VRN_WEIGHT_COMPARISONS)
def test_vrn_weight_comparisons_render_byte_identical(runs, folder, tmp_path, monkeypatch):
    from cl_diag.orchestration.compare import CompareConfig, compare, recorded_plan

    study = REPO / "reports" / "vrn-weight"
    copy = tmp_path / "reports" / "vrn-weight"
    shutil.copytree(study / runs, copy / runs, ignore=shutil.ignore_patterns("comparison"))
    monkeypatch.chdir(tmp_path)
    inputs = sorted(
        Path("reports", "vrn-weight", runs, p.parent.parent.name, "analysis")
        for p in (study / runs).glob("*/analysis/result.json")
    )
    recorded = json.loads((study / folder / "provenance.json").read_text(encoding="utf-8"))
    compare(
        CompareConfig(
            inputs=inputs,
            out=Path("reports", "vrn-weight", folder),
            sweep=recorded["sweep"],
            plan=recorded_plan(recorded),
        )
    )
    expected = sorted(p.name for p in (study / folder).iterdir())
    assert sorted(p.name for p in (copy / folder).iterdir()) == expected
    for name in expected:
        if name.startswith("."):
            continue
        assert (copy / folder / name).read_bytes() == (study / folder / name).read_bytes(), name


@pytest.mark.slow
def test_vrn_weight_selection_is_what_the_tool_makes_of_the_tuning_runs(tmp_path):
    # selection.json and selection.md: tools/select_vrn.py's choice of lambda from the committed
    # tuning results, the same bytes
    from cl_diag.orchestration.tune import load_tuning, select_vrn

    study = REPO / "reports" / "vrn-weight"
    selection = select_vrn(load_tuning(study / "tuning"))
    assert selection.json_text() == (study / "selection.json").read_text(encoding="utf-8")
    assert selection.markdown() == (study / "selection.md").read_text(encoding="utf-8")
    # the README gives the choice as the tool printed it
    readme = (study / "README.md").read_text(encoding="utf-8")
    for setting in selection.settings:
        assert f"{setting.label}: λ* = {setting.selected:g}" in readme
    # the test stage's VRN runs trained at the selected lambda, recording that choice
    chosen = {dict(s.values)["batch_size"]: s.selected for s in selection.settings}
    tuned = [load(p) for p in sorted((study / "test").glob("*/analysis/result.json"))]
    assert len(tuned) >= 20
    for result in tuned:
        config = result.config
        if config["vrn"] > 0:
            assert config["vrn"] == chosen[config["batch_size"]]
            assert config["vrn_tuning_split"] == "validation"
        else:
            assert "vrn_tuning_grid" not in config
