#!/usr/bin/env python3
"""Quote a reference report's generated findings in its README, so the README never paraphrases.

A README in ``reports/`` holds one block between these two lines::

    <!-- findings: generated, see tools/quote_findings.py -->
    <!-- /findings -->

and the block holds the summary sentences of the Findings section of ``comparison/report.md``
(one Markdown list item each), exactly as the tool wrote them. Run it from the repository root
after regenerating a report::

    python tools/quote_findings.py reports/digits-batch-study reports/toy-vrn

``--check`` changes nothing and exits 1 when a README's block differs from its report
(``tests/test_reference_reports.py`` makes the same check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BEGIN = "<!-- findings: generated, see tools/quote_findings.py -->"
END = "<!-- /findings -->"
#: how the Findings section of a report marks a claim's summary sentence
BULLET = "• "


def generated(report_md: Path) -> list[str]:
    """The summary sentences of the Findings section of a report.md, in order."""
    text = report_md.read_text(encoding="utf-8")
    start = text.index("## Findings")
    end = text.index("\n## ", start + 1)
    return [line[len(BULLET) :] for line in text[start:end].splitlines() if line.startswith(BULLET)]


def quoted(readme: Path) -> list[str]:
    """The sentences a README's findings block quotes (its list items)."""
    text = readme.read_text(encoding="utf-8")
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def rewrite(readme: Path, lines: list[str]) -> str:
    """The README's text with its findings block replaced by ``lines``."""
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "".join(f"- {line}\n" for line in lines)
    return f"{head}{BEGIN}\n{body}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="reference report folders")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = parser.parse_args(argv)
    status = 0
    for folder in args.folders:
        readme, report = folder / "README.md", folder / "comparison" / "report.md"
        lines = generated(report)
        if args.check:
            if quoted(readme) != lines:
                print(f"{readme}: the quoted findings differ from {report}", file=sys.stderr)
                status = 1
            continue
        readme.write_text(rewrite(readme, lines), encoding="utf-8")
        print(f"{readme}: {len(lines)} findings quoted")
    return status


if __name__ == "__main__":
    sys.exit(main())
