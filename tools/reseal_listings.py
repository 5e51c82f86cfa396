"""Seal the ownership listings that a cl-diag before seals wrote (issue 26).

Before version 2 of ``.cl-diag-owned`` a listing held the plain SHA-256 of each file, which
proves nothing now: the next run into such a folder refuses to replace its files (``--overwrite``
once makes them cl-diag's again). For folders one knows to be cl-diag's own -- the committed
reference reports, after a branch regenerated them with an older cl-diag -- this tool rewrites
each listing under the given folders with seals, but only for the files whose content still
matches the hash the old listing records; it prints what it did and changes nothing else.

    python tools/reseal_listings.py reports/
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from cl_diag.io.output import OWNED_FILES, listing_text, read_listing, seal


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
