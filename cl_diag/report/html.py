"""Render a :class:`~cl_diag.report.document.Document` as one self-contained HTML page.

No scripts and no external resources: the CSS is inline and each SVG figure is
embedded as a base64 ``data:`` URI in an ``<img>`` (each figure stays an isolated
document, so the ids Matplotlib writes cannot collide between figures). The page
opens offline, from a file or an e-mail attachment.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from html import escape
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
    anchors,
    contents,
)

# A backslash at a line's end joins it to the next: each rule stays one line of the page.
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1b1b1b; background: #ffffff; margin: 0; line-height: 1.45; }
main { max-width: 1240px; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.6rem; border-bottom: 2px solid #d0d7de; padding-bottom: .3rem; }
h2 { font-size: 1.3rem; margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; \
padding-bottom: .2rem; }
h3 { font-size: 1.1rem; margin-top: 1.6rem; }
.table-wrap { overflow-x: auto; margin: .8rem 0 1.2rem; }
table { border-collapse: collapse; font-size: .86rem; }
caption { caption-side: top; text-align: left; color: #444; font-style: italic; \
padding-bottom: .35rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
tbody tr:nth-child(even) { background: #fafbfc; }
td:first-child { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num.parts { white-space: normal; } td.num.parts > span { white-space: nowrap; }
figure { margin: 1rem 0 1.6rem; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #e1e4e8; }
figcaption { font-size: .85rem; color: #444; margin-top: .35rem; }
.note { border-left: 4px solid #d4a72c; background: #fff8e5; padding: .5rem .8rem; \
margin: .8rem 0; }
td.supported { background: #e6f4ea; } td.contradicted { background: #fce8e6; }
td.inconclusive { background: #f1f3f4; } td.not-borne-out { background: #fdf0dc; }
td.long { white-space: normal; min-width: 14rem; max-width: 36rem; overflow-wrap: break-word; }
.headline { display: flex; flex-wrap: wrap; gap: .4rem 1.5rem; align-items: flex-start; \
border: 1px solid #d0d7de; border-radius: 6px; padding: .6rem .9rem; margin: .6rem 0 1rem; }
.headline .verdicts { flex: 1 1 100%; margin: 0; font-size: 1.02rem; }
.headline .table-wrap { flex: 0 1 auto; margin: 0; }
.headline figure { flex: 1 1 26rem; margin: 0; }
nav.contents ol { columns: 2; margin: .3rem 0 0; } nav.contents { font-size: .92rem; }
details { margin: 2.2rem 0 1rem; } details > summary { cursor: pointer; font-weight: 600; \
font-size: 1.15rem; border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
""".strip()


#: table cells holding a finding's verdict are tinted by it
_VERDICTS = frozenset({"supported", "not borne out", "contradicted", "inconclusive"})


#: a text cell longer than this wraps in a column of its own minimum width: without it a long
#: first cell (kept on one line) or a long note squeezes its neighbours into tall, narrow cells
_LONG = 48

#: what may follow a number in a numeric cell: a 95 % interval, a replicate count
_TRAILER = re.compile(r"\s*(\[[^\]]*\])?\s*(\(n = \d+\))?$")


def _number_pieces(text: str) -> list[str]:
    """A numeric cell's unbreakable pieces: the value, "± sd", "[lo, hi]", "(n = k)"."""
    match = _TRAILER.search(text)
    core = text[: match.start()] if match else text
    value, plus, spread = core.partition(" ± ")
    pieces = [value, f"± {spread}"] if plus else [value]
    if match:
        pieces += [group for group in match.groups() if group]
    return pieces


def _is_number(text: Cell) -> bool:
    """A cell that is a number: "0.1234", "98.44 %", "mean ± sd" (seed groups), each possibly
    followed by its interval "[lo, hi]" or "(n = k)"; such cells align like numbers."""
    if isinstance(text, Link):
        return False
    core = _TRAILER.sub("", text.replace("−", "-"))
    parts = core.split(" ± ")
    if not core or len(parts) > 2:
        return False
    for part in parts:
        try:
            float(part.removesuffix(" %").removesuffix(" pp"))
        except ValueError:
            return False
    return True


def _table(table: Table) -> str:
    out = ['<div class="table-wrap"><table>']
    if table.caption:
        out.append(f"<caption>{escape(table.caption)}</caption>")
    out.append(
        "<thead><tr>"
        + "".join(f'<th scope="col">{escape(c)}</th>' for c in table.columns)
        + "</tr></thead>"
    )
    out.append("<tbody>")
    for row in table.rows:
        cells = "".join(_td(c) for c in row)
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _td(cell: Cell) -> str:
    if isinstance(cell, Link):
        href = escape(quote(cell.href, safe="/.=_-~:#"))
        return f'<td><a href="{href}">{escape(cell.text)}</a></td>'
    if _is_number(cell):
        pieces = _number_pieces(cell)
        if len(pieces) == 1:
            return f'<td class="num">{escape(cell)}</td>'
        # a narrow window may break the cell between its pieces, never inside one
        spans = " ".join(f"<span>{escape(piece)}</span>" for piece in pieces)
        return f'<td class="num parts">{spans}</td>'
    if cell in _VERDICTS:
        return f'<td class="{cell.replace(" ", "-")}">{escape(cell)}</td>'
    if len(cell) > _LONG:
        return f'<td class="long">{escape(cell)}</td>'
    return f"<td>{escape(cell)}</td>"


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.svg).decode("ascii")
    return (
        f'<figure id="{escape(figure.filename)}">'
        f'<img src="data:image/svg+xml;base64,{data}" alt="{escape(figure.alt)}">'
        f"<figcaption>{escape(figure.caption)}</figcaption></figure>"
    )


def _headline(block: Headline) -> str:
    parts = [f'<p class="verdicts">{escape(block.verdicts)}</p>', _table(block.table)]
    if block.figure is not None:
        parts.append(_figure(block.figure))
    return '<section class="headline" id="headline">\n' + "\n".join(parts) + "\n</section>"


def _contents(items: Sequence[tuple[str, str]]) -> str:
    links = "".join(
        f'<li><a href="#{escape(anchor)}">{escape(text)}</a></li>' for text, anchor in items
    )
    return (
        '<nav class="contents" aria-label="Contents"><strong>Contents</strong>'
        f"<ol>{links}</ol></nav>"
    )


def _block(block: Block, anchor: str | None = None) -> str:
    if isinstance(block, Heading):
        at = f' id="{escape(anchor)}"' if anchor else ""
        return f"<h{block.level}{at}>{escape(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{escape(block.text)}</p>"
    if isinstance(block, Note):
        return f'<div class="note" role="note"><strong>Note.</strong> {escape(block.text)}</div>'
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Figure):
        return _figure(block)
    if isinstance(block, Details):  # collapsed until the reader opens it
        inner = "\n".join(_block(b) for b in block.blocks)
        at = f' id="{escape(anchor)}"' if anchor else ""
        return f"<details{at}>\n<summary>{escape(block.summary)}</summary>\n{inner}\n</details>"
    if isinstance(block, Headline):
        return _headline(block)
    if isinstance(block, Contents):  # filled by render_html, which sees the whole page
        return ""
    raise TypeError(f"unknown report block {type(block).__name__}")  # pragma: no cover


def render_fragment(blocks: Sequence[Block]) -> str:
    """``blocks`` as HTML to embed in a page that is not ours (a notebook's output cell):
    no document, no style, no script; every text escaped."""
    return "\n".join(_block(block) for block in blocks)


def render_html(doc: Document) -> str:
    """The page as text ending in one newline; deterministic for a given document."""
    ids = anchors(doc.blocks)
    body = [
        _contents(contents(doc.blocks))
        if isinstance(block, Contents)
        else _block(block, ids.get(i))
        for i, block in enumerate(doc.blocks)
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # an explicit empty icon: otherwise a browser asks for /favicon.ico
        '<link rel="icon" href="data:,">\n'
        f"<title>{escape(doc.title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )
