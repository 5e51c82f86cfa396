"""Render a :class:`~cl_diag.report.document.Document` as one self-contained HTML page.

No scripts and no external resources: the CSS is inline and each SVG figure is
embedded as a base64 ``data:`` URI in an ``<img>`` (each figure stays an isolated
document, so the ids Matplotlib writes cannot collide between figures). The page
opens offline, from a file or an e-mail attachment.
"""

from __future__ import annotations

import base64
from html import escape

from cl_diag.report.document import Document, Figure, Heading, Note, Paragraph, Table

# A backslash at a line's end joins it to the next: each rule stays one line of the page.
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1b1b1b; background: #ffffff; margin: 0; line-height: 1.45; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.6rem; border-bottom: 2px solid #d0d7de; padding-bottom: .3rem; }
h2 { font-size: 1.3rem; margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; \
padding-bottom: .2rem; }
h3 { font-size: 1.1rem; margin-top: 1.6rem; }
.table-wrap { overflow-x: auto; margin: .8rem 0 1.2rem; }
table { border-collapse: collapse; font-size: .86rem; }
caption { caption-side: top; text-align: left; color: #444; font-style: italic; \
padding-bottom: .35rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
tbody tr:nth-child(even) { background: #fafbfc; }
td:first-child { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 1rem 0 1.6rem; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #e1e4e8; }
figcaption { font-size: .85rem; color: #444; margin-top: .35rem; }
.note { border-left: 4px solid #d4a72c; background: #fff8e5; padding: .5rem .8rem; \
margin: .8rem 0; }
""".strip()


def _is_number(text: str) -> bool:
    # "mean ± std" cells (seed groups) align like numbers
    token = text.replace(" %", "").replace("−", "-").split(" ± ")[0]
    try:
        float(token)
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
        cells = "".join(
            f'<td class="num">{escape(c)}</td>' if _is_number(c) else f"<td>{escape(c)}</td>"
            for c in row
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.svg).decode("ascii")
    return (
        f'<figure id="{escape(figure.filename)}">'
        f'<img src="data:image/svg+xml;base64,{data}" alt="{escape(figure.alt)}">'
        f"<figcaption>{escape(figure.caption)}</figcaption></figure>"
    )


def render_html(doc: Document) -> str:
    """The page as text ending in one newline; deterministic for a given document."""
    body = []
    for block in doc.blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{escape(block.text)}</p>")
        elif isinstance(block, Note):
            body.append(
                f'<div class="note" role="note"><strong>Note.</strong> {escape(block.text)}</div>'
            )
        elif isinstance(block, Table):
            body.append(_table(block))
        elif isinstance(block, Figure):
            body.append(_figure(block))
        else:  # pragma: no cover - the Block union is closed
            raise TypeError(f"unknown report block {type(block).__name__}")
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
