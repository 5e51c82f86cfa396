"""The field-driven codec of cl_diag.io.records, on records written for the test: what it reads,
refuses, writes back, and the JSON Schema it derives (checked by an independent validator)."""

from __future__ import annotations

import json
from dataclasses import dataclass, make_dataclass
from typing import Any, ClassVar

import jsonschema
import pytest

from cl_diag.errors import UserError
from cl_diag.io.records import At, Record, json_schema, key, optional


@dataclass(frozen=True, kw_only=True)
class Point(Record):
    """A point."""

    x: float
    y: float | None
    label: str | None = optional("what the point is")
    weight: int = 1


@dataclass(frozen=True, kw_only=True)
class Score(Record):
    """A score at one k."""

    top1: float | None = None


@dataclass(frozen=True, kw_only=True)
class Shape(Record):
    """A shape: named points, scores by k, a ratio written only with its count."""

    points: list[Point] = key("the corners")
    named: dict[str, Point] | None = optional()
    scores: dict[int, Score] = key(pattern="k{}")
    ratio: float | None = key(default=None, omit="count", name="share")
    count: int | None = optional()
    note: Any = optional()


@dataclass(frozen=True, kw_only=True)
class Tagged(Point):
    """A point whose tag comes first in its JSON."""

    tag: str = ""

    _JSON_ORDER: ClassVar[tuple[str, ...]] = ("tag", "x", "y", "label", "weight")


AT = At("shape.json", "a valid shape", "Write it again.")


def test_the_docstring_example():
    assert Point.from_dict({"x": 1, "y": None, "z": True}).to_dict() == {
        "x": 1,
        "y": None,
        "weight": 1,
        "z": True,
    }


def test_values_are_written_back_as_read_ints_floats_order_and_unknown_keys():
    data = {
        "points": [{"x": 1, "y": 2.5, "weight": 3}, {"x": 0.1, "y": None, "label": "b"}],
        "k20": {"top1": 0.5},
        "extra_key": [1, 2],
        "k5": {"top1": 1},
        "share": None,
        "count": 0,
    }
    shape = Shape.from_dict(json.loads(json.dumps(data)), AT)
    assert shape.points[0].x == 1 and isinstance(shape.points[0].x, int)
    assert shape.scores == {20: Score(top1=0.5), 5: Score(top1=1)}
    assert shape.extra == {"extra_key": [1, 2]}
    out = shape.to_dict()
    # declared order (pattern keys where their field is), then the unknown keys
    assert list(out) == ["points", "k20", "k5", "share", "count", "extra_key"]
    assert json.dumps(out["points"][0]) == '{"x": 1, "y": 2.5, "weight": 3}'
    assert out["points"][1] == {"x": 0.1, "y": None, "label": "b", "weight": 1}
    assert Shape.from_dict(out, AT) == shape


def test_omission_rules():
    bare = Shape(points=[], scores={})
    assert bare.to_dict() == {"points": []}  # ratio follows count; None optionals are omitted
    assert Shape(points=[], scores={}, count=3).to_dict() == {
        "points": [],
        "share": None,
        "count": 3,
    }
    # an empty object reads as an absent record
    assert Shape.from_dict({"points": [], "named": {}}, AT).named == {}
    assert Point.from_dict({"x": 1, "y": 2, "label": None}).label is None


#: records the reader refuses, and how it says so
DAMAGED = [
    ({"scores": {}}, "'points' is missing"),
    ({"points": [{"y": 1}]}, "'points.0.x' is missing"),
    ({"points": [{"x": "1", "y": 1}]}, "'points.0.x' is not a number"),
    ({"points": [{"x": True, "y": 1}]}, "'points.0.x' is not a number"),
    ({"points": [{"x": 1, "y": 1, "weight": 1.0}]}, "'points.0.weight' is not an integer"),
    ({"points": [{"x": 1, "y": 1, "weight": None}]}, "'points.0.weight' is not an integer"),
    ({"points": {}}, "'points' is not a list"),
    ({"points": [], "k20": 0.5}, "'k20' is not an object"),
    ({"points": [], "named": {"a": 3}}, "'named.a' is not an object"),
    ({"points": [], "count": False}, "'count' is not an integer"),
    ({"points": [{"x": 1, "y": 1, "label": 4}]}, "'points.0.label' is not a string"),
]


@pytest.mark.parametrize("data, message", DAMAGED)
def test_a_missing_or_mistyped_key_is_named(data, message):
    with pytest.raises(UserError) as err:
        Shape.from_dict(data, AT)
    assert str(err.value) == f"shape.json is not a valid shape: {message}. Write it again."


def test_json_order_of_a_subclass():
    tagged = Tagged(x=1, y=2, tag="t")
    assert list(tagged.to_dict()) == ["tag", "x", "y", "weight"]
    assert Tagged.json_keys() == ("tag", "x", "y", "label", "weight")


def test_the_schema_accepts_what_is_written_and_refuses_what_the_reader_refuses():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **json_schema(Shape)}
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    written = Shape(
        points=[Point(x=1, y=None, label="a")],
        named={"b": Point(x=2.0, y=3)},
        scores={20: Score(top1=0.5)},
        count=2,
        ratio=0.5,
        note={"any": "thing"},
    ).to_dict()
    assert list(validator.iter_errors(written)) == []
    assert schema["$defs"]["Shape"]["required"] == ["points"]
    assert schema["$defs"]["Shape"]["properties"]["share"] == {"type": ["number", "null"]}
    assert schema["$defs"]["Point"]["description"] == "A point."
    # every record the reader refuses, the schema refuses too; but 1.0 where an integer belongs:
    # JSON has one number type and JSON Schema calls 1.0 an integer, the reader does not
    for data, message in DAMAGED:
        whole_float = data.get("points") == [{"x": 1, "y": 1, "weight": 1.0}]
        assert bool(list(validator.iter_errors(data))) is not whole_float, message


def test_two_record_classes_of_one_name_are_refused():
    # another class named Point (made here: a second module-level Point cannot be written)
    other = make_dataclass("Point", [("z", int)], bases=(Record,), frozen=True, kw_only=True)
    clash = make_dataclass(
        "Clash", [("a", Point), ("b", other)], bases=(Record,), frozen=True, kw_only=True
    )
    with pytest.raises(ValueError, match="two record classes are named Point"):
        json_schema(clash)
