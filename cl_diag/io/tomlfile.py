"""The TOML parser the recipes, probe suites and study plans are read with: ``tomllib`` from
Python 3.11, the same parser as the ``tomli`` package on 3.10 (a declared dependency there)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["tomllib"]
