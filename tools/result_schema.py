#!/usr/bin/env python3
"""Write docs/result.schema.json, the JSON Schema of result.json, from the typed result model.

The schema is generated, never edited by hand: :func:`cl_diag.result.json_schema` derives it
from the fields of cl_diag/result/. Run it from the repository root after changing the model::

    python tools/result_schema.py

``--check`` changes nothing and exits 1 when the committed file differs from the model
(``tests/test_result_schema.py`` makes the same check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cl_diag.result import json_schema_text

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "result.schema.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a change")
    args = parser.parse_args(argv)
    text = json_schema_text()
    current = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.is_file() else None
    if args.check:
        if current != text:
            print(f"{SCHEMA_FILE} differs from the model: run python tools/result_schema.py")
            return 1
        return 0
    if current != text:
        SCHEMA_FILE.write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
