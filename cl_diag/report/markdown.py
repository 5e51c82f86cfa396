"""Render a :class:`~cl_diag.report.document.Document` as GitHub-flavoured Markdown.

Figures are referenced by file name (the SVG files sit beside report.md).
"""

from __future__ import annotations

import re
from urllib.parse import quote

from cl_diag.report.document import (
    Block,
    Cell,
    Contents,
    Details,
    Document,
    Figure,
    Heading,
    Headline,
    Link,
    Note,
    Paragraph,
    Table,
    contents,
)

#: Where Markdown (CommonMark / GFM) would read raw HTML or an autolink: a '<' that starts a
#: tag, a closing tag, a comment, declaration or processing instruction, or an autolink.
_HTML_START = re.compile(
    r"<(?="
    r"[A-Za-z][A-Za-z0-9-]*(?:[\s/>]|$)"  # <tag ...>, <tag/>, <tag>
    r"|/[A-Za-z]"  # </tag>
    r"|[!?]"  # <!-- -->, <!DOCTYPE>, <![CDATA[, <?...?>
    r"|[A-Za-z][A-Za-z0-9+.-]{1,31}:"  # <scheme:...> autolink
    r"|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@"  # <user@host> autolink
    r")"
)
#: an entity or character reference, which Markdown would turn into the character it names
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _text(text: str) -> str:
    """Plain text (a file name, a run label) as Markdown that shows it literally: a '<' or '&'
    that would start raw HTML, an autolink or an entity is written as its entity, so a file
    named ``<img src=x onerror=...>.npz`` is printed, never rendered. Text without such a '<'
    or '&' (e.g. "E_{i<j}") is unchanged."""
    return _HTML_START.sub("&lt;", _ENTITY.sub("&amp;", text))


def _cell(text: Cell) -> str:
    if isinstance(text, Link):
        # the target percent-encoded: a space or ')' would end the link
        return f"[{_cell(text.text)}]({quote(text.href, safe='/.=_-~:#')})"
    # a literal '|' would end the cell; newlines would end the row
    return _text(text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " "))


def _table(table: Table) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"*{_cell(table.caption)}*", ""]
    lines.append("| " + " | ".join(_cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return lines


def _block(block: Block) -> list[list[str]]:
    if isinstance(block, Heading):
        return [["#" * block.level + " " + _text(block.text)]]
    if isinstance(block, Paragraph):
        return [[_text(block.text)]]
    if isinstance(block, Note):
        return [[f"> **Note.** {_text(block.text)}"]]
    if isinstance(block, Table):
        return [_table(block)]
    if isinstance(block, Figure):
        caption = _text(block.caption)
        return [[f"![{_cell(block.alt)}]({block.filename})", "", f"*{caption}*"]]
    if isinstance(block, Headline):
        parts = [[f"**{_text(block.verdicts)}**"], _table(block.table)]
        return parts + (_block(block.figure) if block.figure is not None else [])
    if isinstance(block, Contents):  # filled by render_markdown, which sees the whole page
        return []
    if isinstance(block, Details):  # Markdown cannot collapse: a section of its own
        heading = [["#" * block.level + " " + _text(block.summary)]]
        return heading + [part for inner in block.blocks for part in _block(inner)]
    raise TypeError(f"unknown report block {type(block).__name__}")  # pragma: no cover


def render_markdown(doc: Document) -> str:
    """Markdown text ending in one newline; deterministic for a given document."""
    parts = []
    for block in doc.blocks:
        if isinstance(block, Contents):
            items = contents(doc.blocks)
            parts.append(
                ["**Contents**", ""] + [f"- [{_cell(text)}](#{anchor})" for text, anchor in items]
            )
        else:
            parts += _block(block)
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
