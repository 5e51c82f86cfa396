#!/usr/bin/env python3
"""Write docs/claims.md from the claims registry (cl_diag/report/claims/table.py), so the table a
reviewer reads is the registry the reports apply. Run from the repository root::

    python tools/claims_doc.py            # rewrite docs/claims.md
    python tools/claims_doc.py --check    # exit 1 when docs/claims.md is stale

``tests/test_claims.py`` makes the same check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cl_diag.report.claims import CLAIMS, Claim, Identity
from cl_diag.report.claims.inference import FRAGILE
from cl_diag.report.claims.schema import WORKS, Condition
from cl_diag.report.claims.table import ROUNDING, SAMPLING_SIGMAS

DOC = Path("docs") / "claims.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _conditions(conditions: Sequence[Condition]) -> str:
    return "; ".join(c.requires for c in conditions) or "—"


def claims_markdown() -> str:
    """docs/claims.md: the registry as tables a reviewer can read without the code."""
    lines = [
        "# Claims the reports test",
        "",
        "Generated from the registry `cl_diag/report/claims/table.py` by",
        "`python tools/claims_doc.py`; `tests/test_claims.py` fails when this file is stale.",
        "Every report's *Findings* section applies these entries to its runs with one evaluator",
        "(`cl_diag/report/claims/evaluate.py`).",
        "",
        "Sources: "
        + "; ".join(f"**{k}** = {v}" for k, v in WORKS.items() if k not in ("identity", "none"))
        + ".",
        "",
        "## How a verdict is made",
        "",
        "- The effect is estimated with its standard error on the claim's analysis scale (ln "
        "for a variance or a spread, so a ratio is a difference), by the claim's design: paired"
        " by seed (the t interval of the per-seed differences; Welch's when the arms' seeds "
        "differ), a least-squares trend over a swept option (every run a point, df = points − "
        "2), or one sample against a value (over seeds; for a claim about one trained model, "
        "one run with the sampling error of its analysed images). A statistic counted on a "
        "grid (an accuracy on N test images, a share of pairs) has at least the spread of its "
        "rounding, step/√12, however few seeds landed on one grid point (the floor `cl-diag "
        "reproduce` gives it too).",
        "- A directional claim has four outcomes. *Supported*: the whole interval lies beyond "
        "the size the source claims (the *claimed size*: the source's own number where it "
        "gives one, else the minimum relevant effect, the margin) in the expected direction. "
        "*Not borne out*: the whole interval lies short of the claimed size (the one-sided "
        "test of 'effect ≥ claimed size' rejects: the data show a smaller effect than the "
        "source states, or none). *Contradicted*: the whole interval lies on the other side of"
        " zero by at least the margin. *Inconclusive*: the interval holds the claimed size. "
        "An agreement claim (measured − predicted) has three: supported when the interval lies"
        " within ± the margin, contradicted when it lies entirely beyond it, inconclusive "
        "otherwise.",
        "- Multiplicity: the findings with a verdict in one report are one family; Holm's "
        "step-down at a family-wise 5 % (2.5 % per side) sets the level of each interval: the "
        "i-th most significant of K is judged at 5 %/(K − i + 1) and, from the first that is "
        "not decided, every later one at that level.",
        "- *Replicates*: the probability that an independent replicate study of the same "
        "design gets the same verdict. Its estimate differs from this one by √2·se·T_df (the "
        "difference of two estimates with standard error se each), and its interval is this "
        "one moved by that difference; the probability is that of landing where the verdict "
        "is the same. Where Shapiro-Wilk finds the per-seed effects far from normal (p < 0.05;"
        " e.g. two modes), a bootstrap over seeds (4,000 resamples, a fixed seed) instead. A "
        f"verdict below {100 * FRAGILE:.0f} % is *fragile*.",
        "- *Sensitivity* (a decided verdict, not fragile, with a spread over seeds): the "
        "smallest true effect the design's seeds call supported with 80 % power at the "
        "observed spread and the finding's level (the claimed size plus the noncentral-t shift"
        " ncp·se, scipy's noncentral t); for an agreement claim, the largest true deviation "
        "still called supported with 80 % power.",
        "- *Seeds for 80 % power* (an undecided or fragile verdict): the fewest seeds per "
        "condition (per level for a trend) with which the one-sided t test at the finding's "
        "level detects the margin at the observed spread (scipy's noncentral t). For an "
        "agreement claim, the power to show agreement when the true deviation is 0 (at least "
        "2·power − 1).",
        "- *Not applicable*: the runs are outside the source's scope (the condition is named)"
        " or the data fail a precondition of the claim (*not applicable here*, with the "
        "reason); never contradicted. Runs outside a claim's domain get no line at all (an "
        "embeddings file without a training config gets only the consistency checks).",
        "",
        "## Predictions (verdicts)",
        "",
        "| key | claim | source | applies to (domain) | at its scope | metric | design | "
        "expected | claimed size and minimum relevant effect | not applicable here when |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if not isinstance(entry, Claim) or entry.kind != "prediction":
            continue
        cells = [
            f"`{entry.key}`",
            entry.statement,
            entry.source.full,
            _conditions(entry.domain),
            f"Requires {_conditions(entry.scope)}. Operationally: {entry.at_scope}.",
            entry.metric.name + (" (ln)" if entry.metric.log else ""),
            entry.design.text,
            f"{entry.expect}: {entry.effect}",
            (f"claimed size {entry.claimed_text}; margin " if entry.claimed_text else "")
            + f"{entry.margin_text}: {entry.margin_why}",
            entry.precondition.requires if entry.precondition else "—",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += [
        "",
        "## Descriptions (no verdict: no source predicts them for these runs)",
        "",
        "| key | quantity | why no verdict | applies to | metric | design |",
        "|---|---|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if not isinstance(entry, Claim) or entry.kind != "description":
            continue
        cells = [
            f"`{entry.key}`",
            f"{entry.statement} ({entry.effect})",
            f"{entry.source.where}: {entry.at_scope}",
            _conditions(entry.domain),
            entry.metric.name,
            entry.design.text,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += [
        "",
        "## Consistency checks (identities: they fail only on a measurement bug)",
        "",
        "Each holds for any unit vectors u_i, v_i of the n analysed instances (ū, v̄ their "
        "means, R = tr Var(u − v) + ‖ū + v̄‖²; paper-notes §5.1). Checked on every layer of "
        f"every run; tolerance {ROUNDING:g} for exact moments (float32 rows), plus "
        f"{SAMPLING_SIGMAS:g} standard errors of the sampled means in sampled mode.",
        "",
        "| key | check | source | identity |",
        "|---|---|---|---|",
    ]
    for entry in CLAIMS.values():
        if isinstance(entry, Identity):
            cells = [f"`{entry.key}`", entry.statement, entry.source.where, entry.formula]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
    args = parser.parse_args(argv)
    text = claims_markdown()
    if args.check:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python tools/claims_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"{DOC}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
