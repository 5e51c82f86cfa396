"""A report as a flat list of blocks, rendered once to Markdown and once to HTML.

Building the content once (``analysis.py``, ``comparison.py``) and rendering it
twice (``markdown.py``, ``html.py``) keeps the two formats saying the same thing.
Cells and paragraphs are plain text (no markup): each renderer escapes for its
format. Numbers go through :func:`fmt` so that both formats print them alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Note:
    """A caveat or warning the reader must not miss (blockquote / coloured box)."""

    text: str


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """An SVG figure: written to ``filename`` beside report.md, inlined in report.html."""

    filename: str
    svg: bytes = field(repr=False)
    caption: str
    alt: str


Block = Heading | Paragraph | Note | Table | Figure


@dataclass(frozen=True)
class Document:
    title: str
    blocks: list[Block]

    @property
    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]


MISSING = "—"


def fmt(value: object, digits: int = 6) -> str:
    """Print a number the same way everywhere: ``digits`` significant digits, ints exact."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}g}"
    return str(value)


def pct(value: object, decimals: int = 2) -> str:
    """A fraction in [0, 1] printed as a percentage."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING
    return f"{100.0 * value:.{decimals}f} %"


def flatten(mapping: object, prefix: str = "") -> dict[str, object]:
    """Nested dicts to dotted keys, in insertion order (for settings and config tables)."""
    out: dict[str, object] = {}
    if not isinstance(mapping, dict):
        return {prefix: mapping} if prefix else {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def fmt_setting(value: object) -> str:
    """A config/settings value: numbers via :func:`fmt`, lists comma-joined."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_setting(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else ", ".join(f"{k}={fmt_setting(v)}" for k, v in value.items())
    if isinstance(value, float):
        return repr(value)
    return fmt(value)
