"""Expectations: named SQL predicates with an action, and their per-batch bookkeeping.

Semantics follow DLT: ``warn`` keeps failing rows and counts them, ``drop`` removes them (and
lakefeed also writes them to ``<table>_quarantine`` with the failed rule names), ``fail`` stops
the flow before anything of the batch is committed. A row passes a rule only when the predicate
is TRUE: NULL counts as a failure, so a missing value never slips through a range check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lakefeed.core.errors import ExpectationError


class Action(StrEnum):
    WARN = "warn"
    DROP = "drop"
    FAIL = "fail"


_RULE_NAME = re.compile(r"^[A-Za-z0-9_ .:-]{1,100}$")


@dataclass(frozen=True)
class Expectation:
    name: str
    predicate: str
    action: Action

    def __post_init__(self) -> None:
        if not _RULE_NAME.match(self.name):
            raise ValueError(
                f"expectation name {self.name!r}: use up to 100 letters, digits, spaces or _.:-"
            )
        if not self.predicate.strip():
            raise ValueError(f"expectation {self.name!r} has an empty predicate")


def check_unique(expectations: Iterable[Expectation], flow: str) -> list[Expectation]:
    """Rule names key the counts: two rules with one name would merge their numbers."""
    rules = list(expectations)
    seen: set[str] = set()
    for rule in rules:
        if rule.name in seen:
            raise ValueError(f"flow {flow!r} declares expectation {rule.name!r} twice")
        seen.add(rule.name)
    return rules


def metric_column(index: int) -> str:
    """Observed-metric column of rule ``index`` (positional: rule names may hold any char)."""
    return f"failed_{index}"


TOTAL_COLUMN = "rows"
OBSERVATION_NAME = "lakefeed_expectations"
FAILED_RULES_COLUMN = "_failed_rules"
QUARANTINE_SUFFIX = "_quarantine"


def quarantine_table(table: str) -> str:
    return f"{table}{QUARANTINE_SUFFIX}"


def rule_counts(rules: list[Expectation], metrics: Mapping[str, Any]) -> dict[str, dict]:
    """Turn one batch's observed metrics into the event log's ``rules`` object."""
    total = int(metrics.get(TOTAL_COLUMN) or 0)
    counts: dict[str, dict] = {}
    for index, rule in enumerate(rules):
        failed = int(metrics.get(metric_column(index)) or 0)
        counts[rule.name] = {
            "action": rule.action.value,
            "passed": total - failed,
            "failed": failed,
        }
    return counts


def dropped_rows(rules: list[Expectation], metrics: Mapping[str, Any]) -> int:
    """Rows failing at least one drop rule (what went to quarantine)."""
    return int(metrics.get("dropped") or 0) if any(r.action is Action.DROP for r in rules) else 0


def fail_message(rule: Expectation, table: str) -> str:
    """The error a fail rule raises; it names the rule, the table and what to do."""
    return str(
        ExpectationError(
            f"expectation {rule.name!r} on {table!r} failed (expect_or_fail: {rule.predicate}); "
            "the batch was not committed",
            fix="fix the input or relax the rule, then run again",
        )
    )
