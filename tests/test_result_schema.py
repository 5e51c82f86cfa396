"""docs/result.schema.json: generated from the result model, and every result.json of the
repository valid against it under an independent validator (the ``jsonschema`` package)."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

from cl_diag.result import SCHEMA, json_schema, json_schema_text

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "docs" / "result.schema.json"
RESULTS = sorted(REPO.glob("reports/**/analysis/result.json")) + sorted(
    (REPO / "tests" / "data").glob("*.json")
)
TOY = REPO / "reports" / "toy-vrn" / "seed=1_vrn=3" / "analysis" / "result.json"
DIGITS = REPO / "tests" / "data" / "digits-b64-vrn30-result.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft202012Validator
    cls.check_schema(schema)  # the schema is itself a valid draft 2020-12 schema
    return cls(schema)


def test_the_committed_schema_is_the_models():
    # the file is generated (tools/result_schema.py): a model change that leaves it behind fails
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json_schema_text(), (
        "docs/result.schema.json is out of date: run python tools/result_schema.py"
    )
    tool = importlib.util.spec_from_file_location(
        "result_schema", REPO / "tools" / "result_schema.py"
    )
    assert tool is not None and tool.loader is not None
    module = importlib.util.module_from_spec(tool)
    tool.loader.exec_module(module)
    assert module.main(["--check"]) == 0


def test_the_schema_names_every_block_and_its_keys():
    schema = json_schema()
    defs = schema["$defs"]
    assert schema["$ref"] == "#/$defs/Result"
    result = defs["Result"]
    assert list(result["properties"])[:5] == ["schema", "tool", "source", "n_ref", "threshold"]
    assert result["required"] == ["schema", "n_ref", "threshold", "layers"]
    assert result["properties"]["schema"]["const"] == SCHEMA
    pair = defs["PairStats"]
    assert pair["properties"]["mean"] == {"type": ["number", "null"]}
    assert pair["properties"]["count"]["type"] == "integer"
    assert "excessive_count" not in pair["required"] and "histogram" in pair["required"]
    # the kNN probe's keys are k20, k200, ...; retrieval's recall_at_1, ...
    assert list(defs["KnnProbe"]["patternProperties"]) == ["^k(\\d+)$"]
    assert list(defs["Retrieval"]["patternProperties"]) == ["^recall_at_(\\d+)$"]
    assert defs["Layer"]["properties"]["pairs"]["additionalProperties"] == {
        "$ref": "#/$defs/PairStats"
    }


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_result_of_the_repository_is_valid(validator, path):
    errors = list(validator.iter_errors(json.loads(path.read_text(encoding="utf-8"))))
    assert errors == []


def test_there_are_results_of_every_kind():
    # the reference studies' 364 runs (tests/test_result.py counts them) and the tests' one file
    assert len(RESULTS) == 365
    assert any('"validation"' in p.read_text() for p in RESULTS)  # vrn-weight's validation probe
    kinds = {json.loads(p.read_text())["source"]["kind"] for p in RESULTS}
    assert kinds == {"checkpoint"}  # toy, digits, supcl and sigmoid runs: all checkpoints
    assert any('"eq10"' in p.read_text() for p in RESULTS)  # a sigmoid theory block
    assert any('"ssem"' in p.read_text() for p in RESULTS)  # the supcl theory block
    assert any('"baselines"' in p.read_text() for p in RESULTS)


@pytest.mark.parametrize(
    "edit, where",
    [
        (lambda d: d["layers"]["embedding"]["pairs"]["positive"].pop("mean"), "mean"),
        (lambda d: d["layers"]["embedding"]["pairs"]["positive"].update(mean="high"), "high"),
        (lambda d: d["layers"]["embedding"].update(n=1.5), "1.5"),
        (lambda d: d["layers"]["embedding"]["pairs"]["positive"].update(estimate=1), "1"),
        (lambda d: d.update(schema="cl-diag/result/2"), "$.schema"),
        (lambda d: d.update(n_ref=1), "1"),
        (lambda d: d.update(layers={}), "{}"),
        (lambda d: d["layers"]["embedding"]["geometry"]["spectrum"].update(u="x"), "x"),
    ],
)
def test_a_damaged_result_is_invalid(validator, edit, where):
    data = json.loads(TOY.read_text(encoding="utf-8"))
    edit(data)
    errors = list(validator.iter_errors(data))
    assert errors and where in " ".join(f"{e.json_path} {e.message}" for e in errors)


def test_keys_of_a_newer_writer_and_probe_keys_are_valid(validator):
    data = json.loads(DIGITS.read_text(encoding="utf-8"))
    future = copy.deepcopy(data)
    future["provenance_hash"] = "abc"
    future["layers"]["projector"]["pairs"]["cross_view_negative"]["skewness"] = 0.25
    future["probes"]["knn"]["k50"] = {"top1": 0.5}
    assert list(validator.iter_errors(future)) == []
    future["probes"]["knn"]["k50"] = {"top1": "half"}
    assert list(validator.iter_errors(future))
