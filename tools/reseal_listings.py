"""Seal the ownership listings that a cl-diag before seals wrote, and mark the figures that a
cl-diag before the mark wrote (issue 26).

Before version 2 of ``.cl-diag-owned`` a listing held the plain SHA-256 of each file, which
proves nothing now: the next run into such a folder refuses to replace its files (``--overwrite``
once makes them cl-diag's again). For folders one knows to be cl-diag's own -- the committed
reference reports, after a branch regenerated them with an older cl-diag -- this tool rewrites
each listing under the given folders with seals, but only for the files whose content still
matches the hash the old listing records; it prints what it did and changes nothing else.

Since the mark (``cl_diag.io.output.carries_mark``), a file is cl-diag's only when it also
begins with cl-diag's mark; the figures of earlier versions lack it (their SVG metadata names
no creator), so a rerun refuses them. For a listed figure whose seal still proves it (and the
figures embedded in a listed report.html), this tool adds the creator cl-diag writes now --
exactly the bytes today's cl-diag renders for the same figure -- and re-seals the listing.

    python tools/reseal_listings.py reports/
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
from pathlib import Path

from cl_diag.io.output import OWNED_FILES, carries_mark, listing_text, read_listing, seal

# what matplotlib writes into a figure's metadata, without and with cl-diag as its creator
_FORMAT = b"    <dc:format>image/svg+xml</dc:format>\n"
_CREATOR = b"    <dc:creator>\n     <cc:Agent>\n      <dc:title>cl-diag</dc:title>\n"
_CREATOR += b"     </cc:Agent>\n    </dc:creator>\n"
_EMBEDDED = re.compile(rb"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)")


def _marked_svg(svg: bytes) -> bytes | None:
    """The figure with cl-diag as its creator; None unless it is one creator-less figure."""
    if svg.count(_FORMAT) != 1 or b"<dc:creator>" in svg:
        return None
    return svg.replace(_FORMAT, _FORMAT + _CREATOR)


def _marked_html(html: bytes) -> bytes:
    def mark(match: re.Match[bytes]) -> bytes:
        svg = _marked_svg(base64.b64decode(match.group(1)))
        if svg is None:
            return match.group(0)
        return b"data:image/svg+xml;base64," + base64.b64encode(svg)

    return _EMBEDDED.sub(mark, html)


def mark_figures(listing: Path) -> str:
    """Add cl-diag's mark to the listed figures (and those embedded in listed HTML reports) of a
    sealed listing whose seals still prove them; re-seal what changed. Say what was done."""
    folder = listing.parent
    found = read_listing(folder)
    if found.kind is None:
        return f"{listing}: not sealed, nothing marked"
    seals = {name: sorted(digests) for name, digests in found.seals.items()}
    marked = 0
    for name, digests in found.seals.items():
        path = folder / name
        if path.is_symlink() or not path.is_file() or seal(path, name) not in digests:
            continue
        data = path.read_bytes()
        if name.endswith(".svg") and not carries_mark(path, name):
            new = _marked_svg(data)
        elif name.endswith(".html"):
            new = _marked_html(data)
        else:
            continue
        if new is not None and new != data:
            path.write_bytes(new)
            seals[name] = [seal(path, name) or ""]
            marked += 1
    if marked:
        listing.write_text(listing_text(found.kind, seals), encoding="utf-8")
    return f"{listing}: {marked} file(s) marked"


def reseal(listing: Path) -> str:
    """Rewrite one version-1 listing with seals; say what was done."""
    folder = listing.parent
    if read_listing(folder).kind is not None:
        return f"{listing}: sealed already"
    lines = listing.read_text(encoding="utf-8").splitlines()
    seals: dict[str, list[str]] = {}
    for line in lines[1:]:
        digest, _, name = line.partition("  ")
        path = folder / name
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
            seals[name] = [seal(path, name) or ""]
    kind = "comparison" if (folder / "comparison.csv").is_file() else "analysis"
    listing.write_text(listing_text(kind, seals), encoding="utf-8")
    return f"{listing}: {len(seals)} file(s) sealed as {kind}"


def main(folders: list[str]) -> int:
    if not folders:
        print(__doc__)
        return 2
    for folder in folders:
        for listing in sorted(Path(folder).rglob(OWNED_FILES)):
            print(reseal(listing))
            print(mark_figures(listing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
