"""Spark's own parser (``sessionState().sqlParser().parsePlan``), asked through the JVM of a
classic session: the authority on what is Spark SQL and which tables a statement names.

lakefeed asks it only about statements sqlglot could not read (see the package doc): whether
Spark accepts the text at all, and the multi-part names of the relations its plan reads or
writes (``UnresolvedRelation``), CTE names left out. The plan crosses over as its JSON (one
Py4J call), so a statement costs one parse, never a walk of JVM objects.
"""

from __future__ import annotations

import json
from typing import Any

_RELATION = "org.apache.spark.sql.catalyst.analysis.UnresolvedRelation"
_WITH = "org.apache.spark.sql.catalyst.plans.logical.UnresolvedWith"


class Rejected(Exception):  # noqa: N818 - an answer, not an error: Spark's own error follows
    """Spark's parser does not accept the statement: Spark's own ``sql`` reports why."""


def relations(spark: Any, text: str) -> list[tuple[str, ...]] | None:
    """The names Spark's parser sees ``text`` read or write (not its CTEs); None without a JVM
    (Spark Connect) or a plan it cannot print. Raises :class:`Rejected` when the text is not
    Spark SQL."""
    session = getattr(spark, "_jsparkSession", None)
    if session is None:
        return None
    try:
        plan = session.sessionState().sqlParser().parsePlan(text)
    except Exception as error:  # ParseException, as pyspark converts it (or Py4J's own)
        raise Rejected(str(error)) from error
    try:
        tree = json.loads(plan.toJSON())
    except Exception:  # a plan Spark cannot print as JSON: no answer, as without a JVM
        return None
    return names_in(tree)


def names_in(plan: Any) -> list[tuple[str, ...]]:
    """The ``UnresolvedRelation`` names of a plan's JSON, subqueries and CTE bodies included,
    a one-part name that is a CTE of the statement left out."""
    found: list[tuple[str, ...]] = []
    ctes: set[str] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            kind = node.get("class")
            if kind == _RELATION:
                found.append(_parts(str(node.get("multipartIdentifier", ""))))
            elif kind == _WITH:
                ctes.update(str(r.get("_1", "")).lower() for r in node.get("cteRelations", []))
            stack.extend(node.values())
    return [n for n in found if len(n) > 1 or n[0].lower() not in ctes]


def _parts(identifier: str) -> tuple[str, ...]:
    """``[db, t]`` (a Scala ``Seq``'s text) as its parts; a ``delta`` path stays whole."""
    parts = identifier.removeprefix("[").removesuffix("]").split(", ")
    if len(parts) > 1 and parts[0].lower() == "delta":
        return (parts[0], ", ".join(parts[1:]))
    return tuple(parts)
