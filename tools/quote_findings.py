#!/usr/bin/env python3
"""Quote a reference report's generated findings and environment fingerprint in its README, so
the README never paraphrases.

A README in ``reports/`` holds two blocks, each between two lines::

    <!-- findings: generated, see tools/quote_findings.py -->
    <!-- /findings -->
    <!-- fingerprint: generated, see tools/quote_findings.py -->
    <!-- /fingerprint -->

(A third, ``<!-- nested: ... -->`` … ``<!-- /nested -->``, is filled where a README has it: the
summary sentences of the nested tuned-λ block of the folder's comparisons.) The first holds the
summary sentences of the Findings section of ``comparison/report.md`` (one
Markdown list item each), exactly as the tool wrote them; the second the environment fingerprint
the runs were trained and analysed under, read from their result.json files (one list item per
field that matters to the bits; each distinct fingerprint when they differ). Run it from the
repository root after regenerating a report::

    python tools/quote_findings.py reports/digits-batch-study reports/toy-vrn

``--check`` changes nothing and exits 1 when a README's block differs from its report
(``tests/test_reference_reports.py`` makes the same check).

``--table reports/README.md`` writes (with ``--check``: checks) the verdict table of the
folders instead, between ``<!-- verdicts: ... -->`` and ``<!-- /verdicts -->``: one row per
claim a study's comparison predicts, with the subjects grouped by verdict, computed from the
committed results by the claims registry, as ``cl-diag compare`` computed the Findings::

    python tools/quote_findings.py --table reports/README.md reports/toy-vrn reports/vrn-weight
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BEGIN = "<!-- findings: generated, see tools/quote_findings.py -->"
END = "<!-- /findings -->"
FINGERPRINT_BEGIN = "<!-- fingerprint: generated, see tools/quote_findings.py -->"
FINGERPRINT_END = "<!-- /fingerprint -->"
#: the fingerprint fields a README shows (result.json's environment block has them all)
FINGERPRINT_FIELDS = (
    ("cpu", "model"),
    ("cpu", "aten_capability"),
    ("threads", "intra_op"),
    ("threads", "inter_op"),
    ("device", None),
    ("libraries", "python"),
    ("libraries", "torch"),
    ("libraries", "numpy"),
    ("builds", "torch_blas"),
    ("builds", "torch_onednn"),
    ("builds", "numpy_blas"),
    ("flags", "deterministic_algorithms"),
)
NESTED_BEGIN = "<!-- nested: generated, see tools/quote_findings.py -->"
NESTED_END = "<!-- /nested -->"
#: the heading of a comparison's nested tuned-λ block (cl_diag.report.tuning_section)
NESTED_HEADING = "### The tuned-λ procedure, nested"
SHARED_BEGIN = "<!-- shared runs: generated, see tools/quote_findings.py -->"
SHARED_END = "<!-- /shared runs -->"
TABLE_BEGIN = "<!-- verdicts: generated, see tools/quote_findings.py -->"
TABLE_END = "<!-- /verdicts -->"
#: the order the verdict table lists a claim's verdicts in
VERDICT_ORDER = ("supported", "not borne out", "contradicted", "inconclusive", "not applicable")
#: how the Findings section of a report marks a claim's summary sentence
BULLET = "• "


def generated(report_md: Path) -> list[str]:
    """The summary sentences of the Findings section of a report.md, in order."""
    text = report_md.read_text(encoding="utf-8")
    start = text.index("## Findings")
    end = text.index("\n## ", start + 1)
    return [line[len(BULLET) :] for line in text[start:end].splitlines() if line.startswith(BULLET)]


def nested(folder: Path) -> list[str]:
    """The summary sentences of the nested tuned-λ block of the comparisons in ``folder`` (any
    ``**/comparison/report.md``: the VRN weight study's is its tuning sweep's), in order."""
    lines = []
    for report in sorted(folder.glob("**/comparison/report.md")):
        text = report.read_text(encoding="utf-8")
        if NESTED_HEADING not in text:
            continue
        start = text.index(NESTED_HEADING)
        end = text.index("\n## ", start + 1)
        lines += [
            line[len(BULLET) :] for line in text[start:end].splitlines() if line.startswith(BULLET)
        ]
    return lines


def quoted_nested(readme: Path) -> list[str] | None:
    """The lines of a README's nested block, None when it has none."""
    text = readme.read_text(encoding="utf-8")
    if NESTED_BEGIN not in text:
        return None
    block = _block(text, NESTED_BEGIN, NESTED_END)
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def fingerprint(folder: Path) -> list[str]:
    """The README's fingerprint lines: the fields of :data:`FINGERPRINT_FIELDS` and every
    environment variable set, of each distinct environment the runs in ``folder`` were trained
    and analysed under (``**/analysis/result.json``: a study may keep its runs in sub-folders)."""
    distinct: dict[str, tuple[dict, list[str]]] = {}
    for path in sorted(folder.glob("**/analysis/result.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        for stage, env in (
            ("training", result.get("source", {}).get("environment")),
            ("analysis", result.get("environment")),
        ):
            if env is not None:
                key = json.dumps(env, sort_keys=True)
                distinct.setdefault(key, (env, []))[1].append(stage)
    lines = []
    for env, stages in distinct.values():
        if len(distinct) > 1:
            lines.append(f"{', '.join(sorted(set(stages)))} of {len(stages)} run stage(s):")
        for block, name in FINGERPRINT_FIELDS:
            value = env.get(block) if name is None else env.get(block, {}).get(name)
            lines.append(f"`{block}{'.' + name if name else ''}`: {value}")
        variables = {k: v for k, v in env.get("variables", {}).items() if v is not None}
        set_ = ", ".join(f"{k}={v}" for k, v in variables.items()) or "none"
        lines.append(f"environment variables set: {set_}")
    return lines


def findings_of(comparison: Path) -> list:
    """The findings of a comparison folder, computed again from the results its
    provenance.json names (:class:`cl_diag.report.comparison.Comparison`, as ``cl-diag
    compare`` computes them)."""
    from cl_diag.report.comparison import Comparison
    from cl_diag.result import load

    record = json.loads((comparison / "provenance.json").read_text(encoding="utf-8"))
    runs = []
    for entry in record["inputs"]:
        folder = comparison / entry  # recorded relative to the comparison folder
        runs.append((folder.parent.name, load(folder / "result.json")))
    return Comparison(runs).findings


def verdict_rows(name: str, comparison: Path) -> list[str]:
    """The verdict table's rows of one study: per claim the comparison predicts, its key and
    statement, and the subjects grouped by verdict ("fragile" kept with its verdict)."""
    from cl_diag.report.claims import CLAIMS

    by_claim: dict[str, dict[str, list[str]]] = {}
    for finding in findings_of(comparison):
        if finding.kind != "prediction" or finding.verdict is None:
            continue
        verdict = finding.verdict + (" (fragile)" if finding.fragile else "")
        by_claim.setdefault(finding.claim, {}).setdefault(verdict, []).append(finding.subject)

    def order(verdict: str) -> tuple[int, str]:
        return VERDICT_ORDER.index(verdict.split(" (")[0]), verdict

    rows = []
    for claim, verdicts in by_claim.items():
        cells = "; ".join(
            f"**{verdict}**: {', '.join(verdicts[verdict])}"
            for verdict in sorted(verdicts, key=order)
        )
        statement = _escape(CLAIMS[claim].statement)
        rows.append(f"| `{name}` | `{claim}`: {statement} | {_escape(cells)} |")
    return rows


def _escape(text: str) -> str:
    """Text for a Markdown table cell (a literal | would end the cell)."""
    return text.replace("|", "\\|")


def verdict_table(folders: list[Path], root: Path) -> list[str]:
    """The whole table (header and rows) of the studies in ``folders`` (each with a
    comparison/; a folder with a tuning/comparison/ too gives a row block for it), named
    relative to ``root``."""
    lines = ["| study | claim | verdicts (subjects) |", "|---|---|---|"]
    for folder in folders:
        for comparison in (folder / "comparison", folder / "tuning" / "comparison"):
            if comparison.is_dir():
                name = comparison.parent.relative_to(root).as_posix() + "/"
                lines += verdict_rows(name, comparison)
    return lines


def _study_runs(folder: Path, root: Path) -> dict[str, list[tuple[str, str]]]:
    """study name -> [(run, its training config as canonical JSON)] of the studies in
    ``folder`` (a tuning sweep beside a test stage is a study of its own)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for comparison in (folder / "comparison", folder / "tuning" / "comparison"):
        if not comparison.is_dir():
            continue
        home = comparison.parent
        runs_home = home / "test" if (home / "test").is_dir() else home
        name = home.relative_to(root).as_posix() + "/"
        out[name] = [
            (
                path.parent.parent.name,
                json.dumps(json.loads(path.read_text(encoding="utf-8"))["config"], sort_keys=True),
            )
            for path in sorted(runs_home.glob("*/analysis/result.json"))
        ]
    return out


def shared_runs(folders: list[Path], root: Path) -> list[str]:
    """One line per pair of studies that hold the same runs: runs whose recorded training
    configs are equal, seed included, were trained by the same command and are the same run
    (training is deterministic under one fingerprint), so their verdicts are one piece of
    evidence, not two. No line when every study's runs are its own."""
    studies: dict[str, list[tuple[str, str]]] = {}
    for folder in folders:
        studies.update(_study_runs(folder, root))
    names = list(studies)
    lines = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            theirs = {config for _, config in studies[b]}
            same = [run for run, config in studies[a] if config in theirs]
            if same:
                lines.append(
                    f"`{a}` and `{b}` share {len(same)} of `{a}`'s {len(studies[a])} runs (the "
                    f"same training config and seed: the same trained weights): {', '.join(same)}"
                )
    return lines or ["no two studies share a run"]


def quoted_shared(readme: Path) -> list[str]:
    """The lines a README's shared-runs block holds (its list items)."""
    text = readme.read_text(encoding="utf-8")
    block = _block(text, SHARED_BEGIN, SHARED_END)
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def quoted_table(readme: Path) -> list[str]:
    """The lines a README's verdict table block holds."""
    text = readme.read_text(encoding="utf-8")
    return _block(text, TABLE_BEGIN, TABLE_END).strip().splitlines()


def rewrite_table(readme: Path, lines: list[str]) -> str:
    head, rest = readme.read_text(encoding="utf-8").split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    body = "".join(f"{line}\n" for line in lines)
    return f"{head}{TABLE_BEGIN}\n{body}{TABLE_END}{tail}"


def _block(text: str, begin: str, end: str) -> str:
    return text[text.index(begin) + len(begin) : text.index(end)]


def quoted(readme: Path) -> list[str]:
    """The sentences a README's findings block quotes (its list items)."""
    text = readme.read_text(encoding="utf-8")
    block = _block(text, BEGIN, END)
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def quoted_fingerprint(readme: Path) -> list[str]:
    """The lines a README's fingerprint block holds (its list items)."""
    text = readme.read_text(encoding="utf-8")
    block = _block(text, FINGERPRINT_BEGIN, FINGERPRINT_END)
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def _replace(text: str, begin: str, end: str, lines: list[str]) -> str:
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = "".join(f"- {line}\n" for line in lines)
    return f"{head}{begin}\n{body}{end}{tail}"


def rewrite(readme: Path, lines: list[str], fingerprint_lines: list[str] | None = None) -> str:
    """The README's text with its findings block replaced by ``lines`` (and its fingerprint
    block by ``fingerprint_lines``, when given)."""
    text = _replace(readme.read_text(encoding="utf-8"), BEGIN, END, lines)
    if fingerprint_lines is not None:
        text = _replace(text, FINGERPRINT_BEGIN, FINGERPRINT_END, fingerprint_lines)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="reference report folders")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    parser.add_argument(
        "--table", type=Path, help="write the folders' verdict table into this README instead"
    )
    args = parser.parse_args(argv)
    if args.table is not None:
        lines = verdict_table(args.folders, args.table.parent)
        shared = shared_runs(args.folders, args.table.parent)
        if args.check:
            if quoted_table(args.table) != lines:
                print(f"{args.table}: the verdict table differs from the results", file=sys.stderr)
                return 1
            if quoted_shared(args.table) != shared:
                print(f"{args.table}: the shared runs differ from the results", file=sys.stderr)
                return 1
            return 0
        text = rewrite_table(args.table, lines)
        args.table.write_text(_replace(text, SHARED_BEGIN, SHARED_END, shared), encoding="utf-8")
        print(f"{args.table}: {len(lines) - 2} claims of {len(args.folders)} studies tabled")
        return 0
    status = 0
    for folder in args.folders:
        readme, report = folder / "README.md", folder / "comparison" / "report.md"
        lines, environment = generated(report), fingerprint(folder)
        nested_lines = nested(folder)
        if args.check:
            if quoted(readme) != lines:
                print(f"{readme}: the quoted findings differ from {report}", file=sys.stderr)
                status = 1
            if quoted_fingerprint(readme) != environment:
                print(f"{readme}: the quoted fingerprint differs from the runs'", file=sys.stderr)
                status = 1
            if quoted_nested(readme) not in (None, nested_lines):
                print(f"{readme}: the quoted nested tuning differs", file=sys.stderr)
                status = 1
            continue
        text = rewrite(readme, lines, environment)
        if NESTED_BEGIN in text:
            text = _replace(text, NESTED_BEGIN, NESTED_END, nested_lines)
        readme.write_text(text, encoding="utf-8")
        print(f"{readme}: {len(lines)} findings and the fingerprint quoted")
    return status


if __name__ == "__main__":
    sys.exit(main())
