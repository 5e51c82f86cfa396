#!/usr/bin/env python3
"""Quote a reference report's generated findings and environment fingerprint in its README, so
the README never paraphrases.

A README in ``reports/`` holds two blocks, each between two lines::

    <!-- findings: generated, see tools/quote_findings.py -->
    <!-- /findings -->
    <!-- fingerprint: generated, see tools/quote_findings.py -->
    <!-- /fingerprint -->

The first holds the summary sentences of the Findings section of ``comparison/report.md`` (one
Markdown list item each), exactly as the tool wrote them; the second the environment fingerprint
the runs were trained and analysed under, read from their result.json files (one list item per
field that matters to the bits; each distinct fingerprint when they differ). Run it from the
repository root after regenerating a report::

    python tools/quote_findings.py reports/digits-batch-study reports/toy-vrn

``--check`` changes nothing and exits 1 when a README's block differs from its report
(``tests/test_reference_reports.py`` makes the same check).
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
#: how the Findings section of a report marks a claim's summary sentence
BULLET = "• "


def generated(report_md: Path) -> list[str]:
    """The summary sentences of the Findings section of a report.md, in order."""
    text = report_md.read_text(encoding="utf-8")
    start = text.index("## Findings")
    end = text.index("\n## ", start + 1)
    return [line[len(BULLET) :] for line in text[start:end].splitlines() if line.startswith(BULLET)]


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
    args = parser.parse_args(argv)
    status = 0
    for folder in args.folders:
        readme, report = folder / "README.md", folder / "comparison" / "report.md"
        lines, environment = generated(report), fingerprint(folder)
        if args.check:
            if quoted(readme) != lines:
                print(f"{readme}: the quoted findings differ from {report}", file=sys.stderr)
                status = 1
            if quoted_fingerprint(readme) != environment:
                print(f"{readme}: the quoted fingerprint differs from the runs'", file=sys.stderr)
                status = 1
            continue
        readme.write_text(rewrite(readme, lines, environment), encoding="utf-8")
        print(f"{readme}: {len(lines)} findings and the fingerprint quoted")
    return status


if __name__ == "__main__":
    sys.exit(main())
