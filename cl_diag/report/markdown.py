"""Render a :class:`~cl_diag.report.document.Document` as GitHub-flavoured Markdown.

Figures are referenced by file name (the SVG files sit beside report.md).
"""

from __future__ import annotations

from urllib.parse import quote

from cl_diag.report.document import Cell, Document, Figure, Heading, Link, Note, Paragraph, Table


def _cell(text: Cell) -> str:
    if isinstance(text, Link):
        # the target percent-encoded: a space or ')' would end the link
        return f"[{_cell(text.text)}]({quote(text.href, safe='/.=_-~:#')})"
    # a literal '|' would end the cell; newlines would end the row
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(table: Table) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"*{_cell(table.caption)}*", ""]
    lines.append("| " + " | ".join(_cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return lines


def render_markdown(doc: Document) -> str:
    """Markdown text ending in one newline; deterministic for a given document."""
    parts: list[list[str]] = []
    for block in doc.blocks:
        if isinstance(block, Heading):
            parts.append(["#" * block.level + " " + block.text])
        elif isinstance(block, Paragraph):
            parts.append([block.text])
        elif isinstance(block, Note):
            parts.append([f"> **Note.** {block.text}"])
        elif isinstance(block, Table):
            parts.append(_table(block))
        elif isinstance(block, Figure):
            parts.append([f"![{_cell(block.alt)}]({block.filename})", "", f"*{block.caption}*"])
        else:  # pragma: no cover - the Block union is closed
            raise TypeError(f"unknown report block {type(block).__name__}")
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
