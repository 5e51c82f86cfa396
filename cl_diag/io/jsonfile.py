"""Parsing a JSON file someone else may have written, with its nesting bounded.

``json.loads`` recurses once per level of nesting: a file of 200,000 nested brackets (a few
hundred kilobytes) ends in a ``RecursionError``, and a structure just under the interpreter's
limit would end in one later, in whatever walks it. :func:`parse_json` refuses both with a
:class:`~cl_diag.errors.UserError`; nothing cl-diag writes or reads nests deeper than a few
levels.
"""

from __future__ import annotations

import json
from typing import Any

from cl_diag.errors import UserError

__all__ = ["MAX_INT_DIGITS", "MAX_JSON_DEPTH", "parse_json"]

#: the deepest nesting of arrays and objects accepted (a result.json nests about six levels)
MAX_JSON_DEPTH = 64


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts, walked without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            items = list(node.values())
        elif isinstance(node, list):
            items = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((item, level + 1) for item in items)
    return deepest


#: the longest integer literal accepted (a count of pairs has at most 20 digits)
MAX_INT_DIGITS = 40


class _Refused(Exception):
    """A literal :func:`parse_json` does not accept (raised from json's hooks)."""


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def _constant(text: str) -> float:
    raise _Refused(f"the non-finite literal {text}")


def parse_json(text: str, *, where: object, fix: str, finite: bool = True) -> Any:
    """``json.loads(text)``, refusing (UserError, naming ``where`` and ``fix``) a document that
    nests arrays or objects more than :data:`MAX_JSON_DEPTH` levels deep, an integer of more
    than :data:`MAX_INT_DIGITS` digits (Python's own limit ends in a ValueError traceback) and,
    with ``finite`` (every file cl-diag writes: NaN and infinities are written as null), a
    ``NaN``/``Infinity`` literal. A document that is no JSON raises ``json.JSONDecodeError``
    as ``json.loads`` does."""
    hooks: dict[str, Any] = {"parse_int": _integer}
    if finite:
        hooks["parse_constant"] = _constant
    try:
        value = json.loads(text, **hooks)
    except RecursionError:
        value = None
        deep = True
    except _Refused as exc:
        raise UserError(
            f"{where} holds {exc}, which no file cl-diag writes does; it is not what it should "
            f"be. {fix}"
        ) from None
    else:
        deep = _depth(value) > MAX_JSON_DEPTH
    if deep:
        raise UserError(
            f"{where} nests JSON arrays or objects more than {MAX_JSON_DEPTH} levels deep, which "
            f"no file cl-diag reads does; it is not what it should be. {fix}"
        )
    return value
