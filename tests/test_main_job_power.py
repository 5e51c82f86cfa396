"""tools/main_job_power.py: the main job's design (issue 23, item 1) predicts its primary claims'
verdicts with the project's own power functions; checked against replicate studies simulated
through the very verdict and borderline rules the reports apply."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from cl_diag.report.claims.inference import borderline, interval_at, replicate_error, verdict

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "reports" / "digits-batch-study"


def _tool():
    spec = importlib.util.spec_from_file_location(
        "main_job_power", REPO / "tools" / "main_job_power.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _simulated(effect: float, sd: float, seeds: int, level: float, margin: float):
    """Shares of simulated paired studies (``seeds`` per-seed differences ~ N(effect, sd))
    whose verdict at the one-sided ``level`` is supported, and supported but not borderline."""
    rng = np.random.default_rng(7)
    supported = clear = 0
    trials = 4000
    for _ in range(trials):
        diffs = rng.normal(effect, sd, seeds)
        mean, se, df = diffs.mean(), diffs.std(ddof=1) / math.sqrt(seeds), seeds - 1
        interval = interval_at(mean, se, df, 1 - 2 * level)
        if verdict(mean, interval, expect="decrease", minimum=margin) == "supported":
            supported += 1
            reach = replicate_error(se, df)
            if not borderline(interval, expect="decrease", minimum=margin, reach=reach):
                clear += 1
    return supported / trials, clear / trials


@pytest.mark.parametrize(("effect", "sd", "seeds"), [(-0.30, 0.12, 4), (-0.45, 0.12, 5)])
def test_predicted_power_matches_simulated_verdicts(effect, sd, seeds):
    tool = _tool()
    margin = tool._claim("vrn_variance").margin
    level = 0.025 / 8
    spread = tool.Spread("vrn_variance", "b", effect, sd, "one_sample")
    p = tool.predict(spread, seeds, level)
    supported, clear = _simulated(effect, sd, seeds, level, margin)
    # the noncentral t is exact for normal differences; 4,000 trials: sd of a share <= 0.008
    assert p.decided == pytest.approx(supported, abs=0.03)
    assert p.clear == pytest.approx(clear, abs=0.03)
    assert 0.05 < p.clear < p.decided < 1.0  # the cases are not trivial


def test_an_effect_inside_the_margin_is_decided_by_no_design():
    tool = _tool()
    margin = tool._claim("batch_variance").margin
    spread = tool.Spread("batch_variance", "x", -0.5 * margin, 1e-4, "slope", (4.0, 6.0))
    p = tool.predict(spread, 1000, 0.025 / 8)
    assert p.decided == 0.0 and p.clear == 0.0


def test_family_size_is_what_the_report_counts():
    tool = _tool()
    runs = tool.read_runs([STUDY])
    sizes = {r.batch_size for r in runs}
    arms = len({r.vrn or 0.0 for r in runs}) - 1
    assert tool.family_size(sorted(sizes), arms) == tool.measured_family(runs)


def test_the_study_readme_quotes_the_tool_on_the_committed_runs():
    # issue 33, item 6: the power the main job's README quotes is generated from its committed
    # runs (tools/main_job_power.py --write); stale figures fail here
    tool = _tool()
    readme = STUDY / "README.md"
    runs = tool.read_runs([STUDY])
    assert tool.quoted(readme) == tool.markdown(runs, "16,64:3,30", [5, 6, 7, 10])
    # the README does not keep the figures of an earlier state of the runs outside the block
    text = readme.read_text(encoding="utf-8")
    assert "0.83 for the batch" not in text
