#!/usr/bin/env python3
"""Power of candidate designs of the README's main job (issue 23, item 1), from the spreads a
digits study measured.

The main job's primary claims are the registry's ``vrn_variance`` (VRN lowers the variance of
the cross-view negatives: paired by seed, one finding per batch size) and ``batch_variance``
(smaller batches give a larger variance: the least-squares slope of ln variance on log2 m, one
finding per VRN arm). For each candidate design this tool predicts, for every finding of those
claims, the probability that it comes out *supported* and the probability that it comes out
supported and not *borderline*, taking the effect and the replicate spread measured in the
given study folders as the truth, with the project's own functions:

* the effect e and spread sd of a finding are those :mod:`cl_diag.report.claims.designs`
  estimates from the runs (per-seed differences for a paired claim; the residual sd of the
  slope for a trend), restricted to the candidate's batch sizes;
* the finding's level is the strictest one Holm's step-down can give it,
  a = 2.5 % / K (:data:`cl_diag.report.claims.evaluate.FAMILY_ALPHA`), K the findings with a verdict
  in the design's report (counted by :func:`cl_diag.report.claims.evaluate.run_findings` on the
  measured runs, and for a design with other batch sizes by the claims' units: (B + 2)(L + 1) for
  B batch sizes and L VRN weights beside no VRN);
* *supported* needs the interval at level a to clear the margin m: the one-sided t test of
  H0: |effect| <= m, whose power at the true |e| is
  :func:`cl_diag.report.claims.inference.power` with the margin |e| - m (a shift of the null);
* *not borderline* also needs the interval end to clear the margin by the replicate prediction
  error w = t_{0.975, df} √2 se (:func:`cl_diag.report.claims.inference.replicate_error`): the same
  power at the larger critical value t_{1-a, df} + t_{0.975, df} √2, i.e. at the level
  P(T_df > t_{1-a, df} + t_{0.975, df} √2).

The seed count a design needs for 80 % power to detect the margin itself
(:func:`cl_diag.report.claims.inference.seeds_needed`, the report's figure) is printed beside it.
An effect that sits at its margin (|e| <= m) gets no power from any seed count: the tool says
so. The run time of a design is the sum of its runs' measured seconds (``--seconds``).

Run from the repository root, e.g. on the committed study (its own spreads: how many seeds
would do) and on the earlier design's runs (commit 134a67a)::

    python tools/main_job_power.py reports/digits-batch-study --design 16,64:3 --seeds 5,6,7
    mkdir -p /tmp/old && git archive 134a67a reports/digits-batch-study | tar -x -C /tmp/old
    python tools/main_job_power.py /tmp/old/reports/digits-batch-study --design 16,32,64:30

``--write README`` puts the first design's table between the README's power markers: the
figures a study's README quotes are this tool's output on its committed runs, and
``tests/test_main_job_power.py`` fails when they are stale::

    python tools/main_job_power.py reports/digits-batch-study --design 16,64:3 --seeds 5,6,7 \
        --write reports/digits-batch-study/README.md

Each ``--design`` is ``BATCHES:LAMBDAS`` (the batch sizes, the VRN weights); its runs must be in
the folders given (every batch size with and without that λ). Deterministic: no random draw.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

from cl_diag.report.claims import CLAIMS, FAMILY_ALPHA, Claim, RunData, run_findings
from cl_diag.report.claims.inference import power, seeds_needed
from cl_diag.result import load

PRIMARY = ("vrn_variance", "batch_variance")
#: the two-sided 97.5 % quantile's factor of the replicate prediction error (t √2 se)
SQRT2 = math.sqrt(2.0)


def _claim(key: str) -> Claim:
    claim = CLAIMS[key]
    assert isinstance(claim, Claim)
    return claim


def read_runs(folders: Sequence[Path]) -> list[RunData]:
    """Every run's facts on its loss layer, from ``<folder>/*/analysis/result.json``."""
    runs = []
    for folder in folders:
        for path in sorted(folder.glob("*/analysis/result.json")):
            data = RunData.of(load(path), label=f"{folder.name}/{path.parent.parent.name}")
            if data is not None:
                runs.append(data)
    return runs


@dataclass(frozen=True)
class Spread:
    """One finding's measured effect e and replicate spread sd on the analysis scale, with the
    design of its power calculation and the x levels of a trend."""

    claim: str
    subject: str
    effect: float
    sd: float
    design: str
    levels: tuple[float, ...] = ()
    seeds: int = 0


def _by(runs: Sequence[RunData], batch: float, vrn: float) -> dict[object, RunData]:
    return {r.seed: r for r in runs if r.batch_size == batch and (r.vrn or 0.0) == vrn}


def spreads(runs: Sequence[RunData], batches: Sequence[int], lams: Sequence[float]) -> list[Spread]:
    """The primary findings' effects and spreads for the design's batch sizes and VRN weights
    ``lams``, from the seeds both arms (or every level) share, with the claims' own metric (ln
    variance): vrn_variance per batch size and λ, batch_variance per arm (none, then each λ)."""
    out = []
    metric = _claim("vrn_variance").metric
    for lam in lams:
        for m in batches:
            control, treated = _by(runs, m, 0.0), _by(runs, m, lam)
            seeds = sorted(set(control) & set(treated), key=repr)
            if len(seeds) < 2:
                raise SystemExit(f"need >= 2 seeds of batch {m} with and without VRN {lam:g}")
            diffs = []
            for s in seeds:
                a, b = metric.value(control[s]), metric.value(treated[s])
                assert a is not None and b is not None
                diffs.append(b - a)
            mean = sum(diffs) / len(diffs)
            sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
            out.append(Spread("vrn_variance", f"b{m}: VRN {lam:g} vs none", mean, sd, "one_sample"))
    metric = _claim("batch_variance").metric
    for lam_arm in (0.0, *lams):
        xs, ys = [], []
        for m in batches:
            for r in _by(runs, m, lam_arm).values():
                y = metric.value(r)
                assert y is not None and r.log2_batch is not None
                xs.append(r.log2_batch)
                ys.append(y)
        fit = stats.linregress(xs, ys)
        resid = [y - (fit.intercept + fit.slope * x) for x, y in zip(xs, ys, strict=True)]
        sd = math.sqrt(sum(e * e for e in resid) / (len(xs) - 2))
        arm = "no VRN" if lam_arm == 0.0 else f"VRN {lam_arm:g}"
        levels = tuple(sorted({math.log2(m) for m in batches}))
        out.append(
            Spread("batch_variance", f"{arm}: slope per doubling", fit.slope, sd, "slope", levels)
        )
    return out


def parse_design(design: str) -> tuple[list[int], list[float]]:
    """``BATCHES:LAMBDAS`` (e.g. ``16,64:3,30``) -> the batch sizes and the VRN weights."""
    batch_text, lam_text = design.split(":")
    return [int(b) for b in batch_text.split(",")], [float(w) for w in lam_text.split(",")]


def family_size(batches: Sequence[int], arms: int = 1) -> int:
    """K, the findings with a verdict in the main job's report with ``arms`` VRN weights: per
    batch size vrn_variance for each weight and excessive_share (no VRN), per arm (none and each
    weight) batch_variance and batch_accuracy (vrn_accuracy is not applicable at a fixed λ):
    (B + 2)(arms + 1)."""
    return (len(batches) + 2) * (arms + 1)


def measured_family(runs: Sequence[RunData]) -> int:
    """K as the evaluator counts it on the measured runs (the check of :func:`family_size`)."""
    return sum(1 for f in run_findings(runs) if f.kind == "prediction" and f.p_value is not None)


@dataclass(frozen=True)
class Prediction:
    spread: Spread
    seeds: int
    level: float
    decided: float  # P(supported, or contradicted for an effect on the other side)
    clear: float  # P(decided and not borderline)
    needed: int | None  # seeds for 80 % power to detect the margin


def predict(spread: Spread, seeds: int, level: float) -> Prediction:
    """P(decided) and P(decided, not borderline) with ``seeds`` seeds (per level of a trend) at
    the one-sided ``level``, the measured effect and spread taken as the truth: decided is
    *supported* for an effect beyond -m (both claims expect a decrease), *contradicted* for one
    beyond +m; an effect within ±m is decided by no seed count (power 0)."""
    claim = _claim(spread.claim)
    assert claim.margin is not None and claim.expect == "decrease"
    # how far the effect clears the margin on its side (supported or contradicted)
    beyond = abs(spread.effect) - claim.margin
    needed = seeds_needed(
        spread.design, margin=claim.margin, sd=spread.sd, alpha=level, levels=spread.levels
    )
    if beyond <= 0:
        return Prediction(spread, seeds, level, 0.0, 0.0, needed)
    df = seeds - 1 if spread.design == "one_sample" else seeds * len(spread.levels) - 2
    critical = float(stats.t.ppf(1 - level, df)) + float(stats.t.ppf(0.975, df)) * SQRT2
    clear = float(stats.t.sf(critical, df))

    def at(alpha: float) -> float:
        return power(
            spread.design, seeds, margin=beyond, sd=spread.sd, alpha=alpha, levels=spread.levels
        )

    return Prediction(spread, seeds, level, at(level), at(clear), needed)


def _seconds(text: str) -> dict[int, float]:
    out = {}
    for part in text.split(","):
        m, s = part.split("=")
        out[int(m)] = float(s)
    return out


#: the README block this tool writes (``--write``) and the tests compare with the committed runs
BEGIN = "<!-- power: generated, see tools/main_job_power.py -->"
END = "<!-- /power -->"


def markdown(runs: Sequence[RunData], design: str, seeds: Sequence[int]) -> list[str]:
    """The design's primary findings as a Markdown table: measured effect and sd (ln scale), the
    margin, and for each seed count P(supported) and P(supported, not borderline)."""
    batches, lams = parse_design(design)
    k = family_size(batches, len(lams))
    level = FAMILY_ALPHA / k
    head = " | ".join(f"{n} seeds" for n in seeds)
    lines = [
        f"Design {design} (batch sizes {', '.join(map(str, batches))}, VRN λ = "
        f"{', '.join(f'{w:g}' for w in lams)}), "
        f"K = {k} findings with a verdict, strictest one-sided level "
        f"{level:.3g}; P(decided) / P(decided, not borderline) for a replicate study:",
        "",
        f"| finding | effect (ln) | sd | margin | {head} |",
        "|---|---|---|---|" + "---|" * len(seeds),
    ]
    for spread in spreads(runs, batches, lams):
        margin = _claim(spread.claim).margin
        cells = []
        for n in seeds:
            p = predict(spread, n, level)
            cells.append(f"{p.decided:.2f} / {p.clear:.2f}")
        lines.append(
            f"| `{spread.claim}` {spread.subject} | {spread.effect:+.3f} | {spread.sd:.3f} | "
            f"{margin:.3f} | {' | '.join(cells)} |"
        )
    return lines


def quoted(readme: Path) -> list[str]:
    """The lines of a README's generated power block."""
    text = readme.read_text(encoding="utf-8")
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    return block.strip("\n").splitlines()


def rewrite(readme: Path, lines: list[str]) -> str:
    """The README's text with its power block replaced by ``lines``."""
    head, rest = readme.read_text(encoding="utf-8").split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "".join(f"{line}\n" for line in lines)
    return f"{head}{BEGIN}\n{body}{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="study folders with the runs")
    parser.add_argument("--design", action="append", required=True, help="BATCHES:LAMBDAS")
    parser.add_argument("--seeds", default="3,4,5,6", help="seed counts to evaluate")
    parser.add_argument(
        "--seconds", default="", help="measured seconds per run by batch size, e.g. 16=7,128=12"
    )
    parser.add_argument(
        "--write",
        type=Path,
        metavar="README",
        help=f"replace the README's block between {BEGIN} and {END} with the first design's table",
    )
    args = parser.parse_args(argv)
    runs = read_runs(args.folders)
    if args.write is not None:
        seed_counts = [int(s) for s in args.seeds.split(",")]
        args.write.write_text(
            rewrite(args.write, markdown(runs, args.design[0], seed_counts)), encoding="utf-8"
        )
        print(f"wrote the power block of {args.write}")
        return 0
    seconds = _seconds(args.seconds) if args.seconds else {}
    for folder in args.folders:
        mine = [r for r in runs if r.label.startswith(f"{folder.name}/")]
        print(f"{folder}: {len(mine)} runs, K = {measured_family(mine)} findings with a verdict")
    for design in args.design:
        batches, lams = parse_design(design)
        k = family_size(batches, len(lams))
        level = FAMILY_ALPHA / k
        weights = ", ".join(f"{w:g}" for w in lams)
        print(
            f"\ndesign: batch sizes {batches}, VRN {weights}; K = {k}, strictest level {level:.3g}"
        )
        for spread in spreads(runs, batches, lams):
            claim = _claim(spread.claim)
            assert claim.margin is not None
            print(
                f"  {spread.claim:15s} {spread.subject:28s} effect {spread.effect:+.4f} "
                f"sd {spread.sd:.4f} margin {claim.margin:.4f}"
            )
            for n in (int(s) for s in args.seeds.split(",")):
                p = predict(spread, n, level)
                verdict = (
                    "supported"
                    if spread.effect < -claim.margin
                    else "contradicted"
                    if spread.effect > claim.margin
                    else "inconclusive: the effect lies within ± the margin"
                )
                print(
                    f"    {n} seeds: P({verdict}) {p.decided:.3f}, "
                    f"and not borderline {p.clear:.3f}; seeds for 80 % power at the margin "
                    f"{p.needed}"
                )
        if seconds:
            per_seed = (len(lams) + 1) * sum(seconds[m] for m in batches)
            print(f"  time: {per_seed:.0f} s per seed (every batch size and VRN arm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
