"""A report as a flat list of blocks, rendered once to Markdown and once to HTML.

Building the content once (``analysis.py``, ``comparison.py``) and rendering it
twice (``markdown.py``, ``html.py``) keeps the two formats saying the same thing.
Cells and paragraphs are plain text (no markup): each renderer escapes for its
format. Numbers go through :func:`fmt` so that both formats print them alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cl_diag.runconfig import flatten as flatten  # settings and config tables, dotted keys


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
class Link:
    """A table cell that links to another file (a run's own report), relative to the report."""

    text: str
    href: str

    def __str__(self) -> str:
        return self.text


#: a table cell: plain text, or a link
Cell = str | Link


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: Sequence[Sequence[Cell]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """An SVG figure: written to ``filename`` beside report.md, inlined in report.html."""

    filename: str
    svg: bytes = field(repr=False)
    caption: str
    alt: str


@dataclass(frozen=True)
class Details:
    """A section a reader opens when needed (the environment fingerprint): a collapsed
    ``<details>`` in HTML whose ``summary`` is its title; in Markdown, which has no collapsing,
    a level-``level`` heading followed by the blocks."""

    summary: str
    blocks: tuple[Heading | Paragraph | Note | Table, ...]
    level: int = 2


@dataclass(frozen=True)
class Headline:
    """A report's first screen: the verdict counts of its findings (``verdicts``, one line),
    the few numbers that matter (``table``) and the one figure that carries them, side by side
    in HTML (``<section id="headline">``), one after the other in Markdown."""

    verdicts: str
    table: Table
    figure: Figure | None = None


@dataclass(frozen=True)
class Contents:
    """The table of contents: a link to every level-2 section after it (headings and
    collapsed sections), by the anchors :func:`anchors` gives them."""


Block = Heading | Paragraph | Note | Table | Figure | Details | Headline | Contents


@dataclass(frozen=True)
class Document:
    title: str
    blocks: list[Block]

    @property
    def figures(self) -> list[Figure]:
        """Every figure, the headline's included, in the order of the page."""
        out = []
        for block in self.blocks:
            if isinstance(block, Figure):
                out.append(block)
            elif isinstance(block, Headline) and block.figure is not None:
                out.append(block.figure)
        return out


def slug(text: str) -> str:
    """A heading's anchor as GitHub writes it for Markdown: lower case, punctuation dropped
    (word characters, spaces and hyphens kept), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def titled(block: Block) -> tuple[int, str] | None:
    """(level, text) of a block that is a section title in both renderers, else None."""
    if isinstance(block, Heading):
        return block.level, block.text
    if isinstance(block, Details):
        return block.level, block.summary
    return None


def anchors(blocks: Sequence[Block]) -> dict[int, str]:
    """Block index -> anchor of every heading and collapsed section, unique in the page: a
    repeated slug gets "-1", "-2", ... in page order, as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = {}
    for i, block in enumerate(blocks):
        title = titled(block)
        if title is None:
            continue
        base = slug(title[1])
        count = seen.get(base, 0)
        seen[base] = count + 1
        out[i] = base if count == 0 else f"{base}-{count}"
    return out


def contents(blocks: Sequence[Block]) -> list[tuple[str, str]]:
    """(text, anchor) of each level-2 section after the :class:`Contents` block."""
    ids = anchors(blocks)
    start = next((i for i, b in enumerate(blocks) if isinstance(b, Contents)), len(blocks))
    out = []
    for i in range(start + 1, len(blocks)):
        title = titled(blocks[i])
        if title is not None and title[0] == 2:
            out.append((title[1], ids[i]))
    return out


MISSING = "—"
#: what every similarity a report prints is (result.json's conventions say it in full)
SIMILARITY_CONVENTION = "cosine similarity of L2-normalised rows"


#: significant digits of every number a report prints (result.json and the CSVs keep them all)
DIGITS = 4


def fmt(value: object, digits: int = DIGITS) -> str:
    """Print a number the same way everywhere: ``digits`` significant digits (4: a report is
    read, the full precision stays in result.json and the CSVs), ints exact."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value.is_integer() and 1e4 <= abs(value) < 1e15:
            # a whole number (a count, (n-2)/2) in full rather than as 2.5e+04
            return str(int(value))
        return f"{value:.{digits}g}"
    return str(value)


def pct(value: object, decimals: int = 2) -> str:
    """A fraction in [0, 1] printed as a percentage."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING
    return f"{100.0 * value:.{decimals}f} %"


def pct_interval(value: object, n: object) -> str:
    """An accuracy on ``n`` items with its 95 % Wilson interval: "98.44 % [96.82, 99.24]"
    (the interval is the sampling error of the n test items; without n the bare value)."""
    text = pct(value)
    if text == MISSING or isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return text
    from cl_diag.measurement.stats import wilson_interval

    lo, hi = wilson_interval(float(value) * n, n)  # type: ignore[arg-type]
    return f"{text} [{100.0 * lo:.2f}, {100.0 * hi:.2f}]"


def fmt_setting(value: object) -> str:
    """A config/settings value: numbers via :func:`fmt`, lists comma-joined."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_setting(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else ", ".join(f"{k}={fmt_setting(v)}" for k, v in value.items())
    if isinstance(value, float):
        return repr(value)
    return fmt(value)
