"""The pair-type vocabulary: one spelling for result.json, the monitor's columns and reports."""

import json

from cl_diag import result
from cl_diag.vocabulary import NEGATIVE_TYPES, PAIR_TYPES, PairType


def test_pair_types_are_result_keys_in_result_order():
    assert [p.value for p in PAIR_TYPES] == list(result.PAIR_TYPES)
    assert [p.value for p in NEGATIVE_TYPES] == list(result.NEGATIVE_TYPES)


def test_a_member_is_its_key_everywhere():
    key = "cross_view_negative"
    assert key == PairType.CROSS_VIEW_NEGATIVE
    assert f"{PairType.CROSS_VIEW_NEGATIVE}" == key
    assert {key: 1}[PairType.CROSS_VIEW_NEGATIVE] == 1
    assert json.dumps({PairType.CROSS_VIEW_NEGATIVE: 1}) == '{"cross_view_negative": 1}'
    assert PairType(key) is PairType.CROSS_VIEW_NEGATIVE


def test_monitor_prefixes_and_labels():
    assert [p.short for p in PAIR_TYPES] == ["pos", "cross_neg", "within_neg"]
    assert PairType.WITHIN_VIEW_NEGATIVE.label == "within-view negative"
    assert not PairType.POSITIVE.is_negative
    assert all(p.is_negative for p in NEGATIVE_TYPES)
