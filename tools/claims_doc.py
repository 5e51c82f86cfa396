#!/usr/bin/env python3
"""Write docs/claims.md from the claims registry (cl_diag/report/claims.py), so the table a
reviewer reads is the registry the reports apply. Run from the repository root::

    python tools/claims_doc.py            # rewrite docs/claims.md
    python tools/claims_doc.py --check    # exit 1 when docs/claims.md is stale

``tests/test_claims.py`` makes the same check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cl_diag.report.claims import claims_markdown

DOC = Path("docs") / "claims.md"


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
