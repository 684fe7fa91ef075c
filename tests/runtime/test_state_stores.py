"""Which state stores ``lakefeed state`` reads for an operator (no Spark: metadata rows only)."""

from __future__ import annotations

import json

from pyspark.sql import Row

from lakefeed.runtime.state import _store_reads

TWS_PROPERTIES = {
    "timeMode": "EventTime",
    "stateVariables": [
        {"stateName": "recent", "stateVariableType": "ListState", "ttlEnabled": False},
        {"stateName": "last_seen", "stateVariableType": "ValueState", "ttlEnabled": True},
        {"stateName": "$eventTimers_keyToTimestamp", "stateVariableType": "TimerState"},
    ],
}


def test_transform_with_state_reads_each_variable_and_the_timers() -> None:
    row = Row(stateStoreName="default", operatorProperties=json.dumps(TWS_PROPERTIES))
    assert _store_reads(row) == [
        ("recent", {"stateVarName": "recent"}),
        ("last_seen", {"stateVarName": "last_seen"}),
        ("timers", {"readRegisteredTimers": "true"}),
    ]


def test_other_operators_read_their_named_stores() -> None:
    join = Row(stateStoreName="left-keyToNumValues", operatorProperties=None)
    assert _store_reads(join) == [("left-keyToNumValues", {"storeName": "left-keyToNumValues"})]
