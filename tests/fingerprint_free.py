"""What two runs in different environments must still share: every output byte for byte, but
for the environment fingerprint (result.json's ``environment`` and ``source.environment``, the
reports' collapsed Environment section, and the listing of the files' hashes)."""

from __future__ import annotations

import json
from pathlib import Path

#: the files whose bytes carry the fingerprint, and how each is compared without it
_MARKERS = {
    "report.md": "\n## Environment\n",
    "report.html": '\n<details id="environment">\n<summary>Environment',
}


def strip_fingerprint(name: str, content: bytes) -> bytes | dict:
    """A file's ``content`` with the fingerprint taken out (result.json as a dict), by its
    ``name``."""
    if name.endswith("result.json"):
        data = json.loads(content)
        data.pop("environment", None)
        data.get("source", {}).pop("environment", None)
        return data
    for file, marker in _MARKERS.items():
        if name.endswith(file):
            text = content.decode("utf-8")
            assert marker in text, f"{name} has no environment section"
            return text[: text.index(marker)].encode()
    return content


def without_fingerprint(path: Path) -> bytes | dict:
    """``path``'s content with the fingerprint taken out (result.json as a dict)."""
    return strip_fingerprint(path.name, path.read_bytes())


def assert_same_but_fingerprint(a: Path, b: Path) -> None:
    """Folders ``a`` and ``b`` hold the same files with the same content, fingerprints aside."""
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        if name == ".cl-diag-owned":  # the hashes of the files compared here
            continue
        assert without_fingerprint(a / name) == without_fingerprint(b / name), name
