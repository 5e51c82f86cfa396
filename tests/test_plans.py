"""Study plans (issue 33 item 1): a plans/*.toml is read strictly, its hash recorded by compare
and sweep, the report shows it with the primary claims first and says where the runs differ
from the planned design; every reference study carries its plan, unedited since."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cl_diag.errors import UserError
from cl_diag.io.plans import load_plan

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "reports" / "toy-vrn"

PLAN = """
study = "runs/toy"
question = "Does VRN shrink the spread?"
declared = "before the runs"
primary = ["toy_spread"]
secondary = ["vrn_variance"]
analysis = "paired by seed"

[grid]
seed = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
vrn = [0, 3]
"""


def _write(tmp_path: Path, text: str, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("study = [", "is not UTF-8 TOML"),
        (PLAN.replace("primary =", "primray ="), "primary"),
        ('colour = "red"\n' + PLAN, "keys a plan does not have (colour)"),
        (PLAN.replace("before the runs", "yesterday"), "declared = 'yesterday'"),
        (PLAN.replace('["toy_spread"]', "[]"), "names no primary claim"),
        (PLAN.replace('study = "runs/toy"', 'study = "runs/toy"\ntext = "gone.md"'), "gone.md"),
        (
            PLAN.replace('study = "runs/toy"', 'study = "runs/toy"\ntext = "../x.md"'),
            "without '..'",
        ),
        (PLAN.replace('study = "runs/toy"', 'study = "runs/toy"\ntext = "/etc/hosts"'), "relative"),
    ],
)
def test_a_bad_plan_is_refused_with_its_problem(tmp_path, text, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_plan(_write(tmp_path, text))


def test_a_folder_or_a_missing_file_is_no_plan(tmp_path):
    with pytest.raises(UserError, match="is a folder"):
        load_plan(tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        load_plan(tmp_path / "nope.toml")


def test_a_plan_naming_an_unknown_claim_is_refused(tmp_path):
    from cl_diag.orchestration.compare import read_plan

    with pytest.raises(UserError, match="claims the registry does not have: toy_sprad"):
        read_plan(_write(tmp_path, PLAN.replace('"toy_spread"', '"toy_sprad"')))


def _toy_runs(tmp_path: Path) -> list[Path]:
    runs = []
    for result in sorted(TOY.glob("*/analysis/result.json")):
        if result.parent.parent.name.endswith("_vrn=30"):
            continue  # the tests' plan names none and λ = 3: 20 runs
        folder = tmp_path / "toy" / result.parent.parent.name / "analysis"
        folder.mkdir(parents=True)
        shutil.copy(result, folder / "result.json")
        runs.append(folder)
    return runs


def test_compare_records_the_plan_and_lists_its_primaries_first(tmp_path, run_cli):
    runs = _toy_runs(tmp_path)
    plan = _write(tmp_path, PLAN)
    (tmp_path / "prose.md").write_text("# the plan in words\n", encoding="utf-8")
    run = run_cli("compare", *runs, "--plan", plan, "--out", tmp_path / "cmp", "--quiet")
    assert run.code == 0, run.err
    record = json.loads((tmp_path / "cmp" / "provenance.json").read_text(encoding="utf-8"))
    assert record["plan"]["sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest()
    assert record["plan"]["plan"]["primary"] == ["toy_spread"]
    md = (tmp_path / "cmp" / "report.md").read_text(encoding="utf-8")
    assert md.index("## Plan") < md.index("## Findings")
    assert f"SHA-256 {record['plan']['sha256'][:12]}…" in md
    assert "declared before the runs" in md
    assert "The runs follow the plan's design: seed ∈ {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}" in md
    bullets = [line for line in md.splitlines() if line.startswith("• ")]
    # the registry lists vrn_variance before toy_spread; the plan's primary comes first
    assert bullets[0].startswith("• Primary: With VRN the spread of the negative similarities")
    assert not any(line.startswith("• Primary:") for line in bullets[1:])
    # without a plan the registry's order, no Plan section
    run = run_cli("compare", *runs, "--out", tmp_path / "plain", "--quiet")
    md = (tmp_path / "plain" / "report.md").read_text(encoding="utf-8")
    assert "## Plan" not in md
    first = next(line for line in md.splitlines() if line.startswith("• "))
    assert first.startswith("• VRN lowers the variance")


def test_the_report_says_where_the_runs_differ_from_the_plan(tmp_path, run_cli):
    runs = _toy_runs(tmp_path)
    text = PLAN.replace("vrn = [0, 3]", "vrn = [0, 30]").replace(
        "[grid]", "[grid]\nbatch-size = [16, 64]"
    )
    text = text.replace("[grid]", '[grid]\nwidth = ["wide"]')
    plan = _write(tmp_path, text.replace("before the runs", "after the runs"))
    run = run_cli("compare", *runs, "--plan", plan, "--out", tmp_path / "cmp", "--quiet")
    assert run.code == 0, run.err
    md = " ".join((tmp_path / "cmp" / "report.md").read_text(encoding="utf-8").split())
    assert "recorded after the runs (retrospectively" in md
    assert "The runs differ from the plan's design:" in md
    assert "the planned option width is not among the options the runs record" in md
    assert "vrn: the plan's {30} has no run" in md
    assert "vrn: the runs' {3} is not in the plan" in md
    assert "batch-size: the plan's {16, 64} has no run" in md
    assert "the plan has 40 runs; the comparison has 20" in md


def test_a_bad_plan_stops_compare_and_sweep_before_anything_is_written(tmp_path, run_cli):
    runs = _toy_runs(tmp_path)
    bad = _write(tmp_path, PLAN.replace('"toy_spread"', '"nope"'))
    run = run_cli("compare", *runs, "--plan", bad, "--out", tmp_path / "cmp")
    assert run.code == 2
    assert "claims the registry does not have: nope" in run.err and "Traceback" not in run.err
    assert not (tmp_path / "cmp").exists()
    run = run_cli(
        "sweep", "trainers/rebuttal-toy.toml", "--grid", "seed=1", "--plan", bad,
        "--out", tmp_path / "sw",
    )  # fmt: skip
    assert run.code == 2 and "nope" in run.err and "Traceback" not in run.err
    assert not (tmp_path / "sw").exists()


def test_sweep_records_its_plan(tmp_path, run_cli):
    plan = _write(
        tmp_path,
        PLAN.replace("seed = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "seed = [1]").replace(
            "vrn = [0, 3]", "vrn = [0]\nsteps = [20]"
        ),
    )
    out = tmp_path / "sw"
    run = run_cli(
        "sweep", REPO / "trainers" / "rebuttal-toy.toml", "--grid", "seed=1", "--steps", "20",
        "--plan", plan, "--out", out, "--quiet",
    )  # fmt: skip
    assert run.code == 0, run.err
    record = json.loads((out / "comparison" / "provenance.json").read_text(encoding="utf-8"))
    assert record["plan"]["path"] == plan.as_posix()
    assert "--plan" in record["sweep"]["command"]
    md = (out / "comparison" / "report.md").read_text(encoding="utf-8")
    assert "The runs follow the plan's design" in md


def _comparisons() -> list[Path]:
    return sorted(p.parent for p in (REPO / "reports").glob("**/comparison/provenance.json"))


@pytest.mark.parametrize("comparison", _comparisons(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_reference_study_records_its_unedited_plan(comparison):
    record = json.loads((comparison / "provenance.json").read_text(encoding="utf-8"))
    assert "plan" in record, "every study has a plans/*.toml and its comparison records it"
    plan = REPO / record["plan"]["path"]
    assert hashlib.sha256(plan.read_bytes()).hexdigest() == record["plan"]["sha256"]
    prose = record["plan"]["plan"].get("text")
    if prose is not None:
        text = (plan.parent / prose).read_bytes()
        assert hashlib.sha256(text).hexdigest() == record["plan"]["text_sha256"]
    md = (comparison / "report.md").read_text(encoding="utf-8")
    assert "## Plan" in md and "The runs differ from the plan's design" not in md


def _commit_time(path: Path, *, first: bool) -> int | None:
    """The commit time of ``path``'s first addition (``first``) or of its last change; None
    outside a git checkout. Not ``--follow``: its copy detection takes a new result.json for an
    old one of another study. A study made again changes its results: its runs are their last
    change."""
    filters = ["--diff-filter=A"] if first else ["-1"]
    out = subprocess.run(
        ["git", "log", *filters, "--format=%ct", "--", str(path)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    stamps = out.stdout.split()
    if out.returncode != 0 or not stamps:
        return None
    return int(stamps[-1])


@pytest.mark.slow
def test_plans_declared_before_their_runs_were_committed_before_them():
    if _commit_time(REPO / "plans" / "README.md", first=True) is None:
        pytest.skip("not a git checkout with history")
    checked = 0
    for path in sorted((REPO / "plans").glob("*.toml")):
        plan = load_plan(path).plan
        if plan.declared != "before the runs" or plan.text is None:
            continue
        prose = _commit_time(REPO / "plans" / plan.text, first=True)
        results = [
            _commit_time(p, first=False)
            for p in sorted((REPO / plan.study).glob("*/analysis/result.json"))
        ]
        assert prose is not None and results and all(r is not None for r in results)
        assert prose <= min(r for r in results if r is not None), path.name
        checked += 1
    # ccem-sigmoid, main-job, sigmoid-within-view-digits-v2, supcl-collapse-free, toy-vrn-v2,
    # toy-vrn-converged-v2
    assert checked == 6
