"""Conditions and values of DeltaTable operations as SQL text for delta-rs.

delta-spark takes a condition as a SQL string or a pyspark ``Column``; delta-rs (DataFusion)
takes SQL text only. A string passes through unchanged. A ``Column`` is resolved by Spark's own
analyzer against empty DataFrames shaped like the tables in scope (``target``/``source``
aliases), and the resolved expression's SQL (``(t.id = s.id)``, ``(s.ts > CAST(... AS
TIMESTAMP))``) is handed over. Resolution makes Spark report unknown or ambiguous columns as it
would; what Spark cannot print as SQL (Python UDFs, aggregates) is refused with one clear error.
Function names must also exist in DataFusion: common SQL (comparisons, AND/OR/NOT, IS NULL, IN,
CASE, CAST, arithmetic, coalesce, concat, upper, ...) does; Spark-only functions fail in delta-rs
with its own message. Timestamp literals without a zone in a SQL string are read by delta-rs as
UTC.

Spark prints timestamps as ``CAST(x AS TIMESTAMP)`` and ``TIMESTAMP '...'``, which DataFusion
types as nanoseconds without a zone and then refuses to compare with Delta's microsecond columns
(``Invalid comparison operation: Timestamp(µs, "UTC") < Timestamp(ns)``), so ``col("birthDate")
< "1960-01-01"`` failed: :func:`for_delta_rs` retypes them as the columns are (TIMESTAMP: µs,
read in the session's time zone as Spark reads them; TIMESTAMP_NTZ: µs without a zone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakefeed.compat.delta_spark.errors import ExpressionError
from lakefeed.sql.tokens import matching_paren, tokens

Condition = str | Column
"""A condition or value as delta-spark accepts it: SQL text or a pyspark Column."""


_REFUSED = ("PythonUDF", "AggregateExpression", "WindowExpression", "ScalarSubquery")


class Scope:
    """The tables a condition may name: alias (or None for unqualified) -> schema."""

    def __init__(self, spark: SparkSession, tables: Mapping[str | None, StructType]) -> None:
        self.spark = spark
        self.tables = dict(tables)
        self._frame: DataFrame | None = None

    def frame(self) -> DataFrame:
        """An empty DataFrame with every table of the scope under its alias."""
        if self._frame is None:
            frames = []
            for alias, schema in self.tables.items():
                empty = self.spark.createDataFrame([], schema)
                frames.append(empty.alias(alias) if alias else empty)
            joined = frames[0]
            for other in frames[1:]:
                joined = joined.crossJoin(other)
            self._frame = joined
        return self._frame

    def sql(self, expression: Condition | None, what: str) -> str | None:
        """``expression`` as SQL text for delta-rs (None stays None)."""
        if expression is None or isinstance(expression, str):
            return expression
        if not isinstance(expression, Column):
            raise ExpressionError(
                f"the {what} must be a SQL string or a pyspark Column, not "
                f"{type(expression).__name__}",
                fix='pass e.g. "t.id = s.id" or F.col("t.id") == F.col("s.id")',
            )
        return self._column_sql(expression, what)

    def _column_sql(self, column: Column, what: str) -> str:
        if getattr(column, "_jc", None) is None:
            raise ExpressionError(
                f"the {what} is a Spark Connect Column, which lakefeed cannot translate",
                fix="pass the condition as a SQL string",
            )
        plan = self.frame().select(column.alias("_lakefeed_expr"))
        # The analyzed projection: columns resolved, names qualified by the aliases in scope.
        projected = plan._jdf.queryExecution().analyzed().projectList().head()
        expression = projected.child()
        refused = _refused_node(expression)
        if refused:
            raise ExpressionError(
                f"the {what} {column} uses {refused}, which cannot be translated to SQL for "
                "the Delta engine (delta-rs)",
                fix="express it with SQL functions, as a SQL string",
            )
        zone = self.spark.conf.get("spark.sql.session.timeZone") or "UTC"
        return for_delta_rs(str(expression.sql()), zone)

    def values(self, mapping: Mapping[str, Condition] | None, what: str) -> dict[str, str]:
        """A ``set``/``values`` mapping with every value as SQL text."""
        if not mapping:
            raise ExpressionError(
                f"the {what} mapping is empty",
                fix='give column -> expression pairs, e.g. {"v": "s.v"}',
            )
        return {
            str(name): str(self.sql(value, f"{what} value of {name!r}"))
            for name, value in mapping.items()
        }


def _refused_node(expression: Any) -> str | None:
    """The class name of the first node Spark cannot express as portable SQL, if any."""
    name = str(expression.getClass().getSimpleName())
    if name in _REFUSED:
        return name
    children = expression.children()
    for index in range(children.size()):
        found = _refused_node(children.apply(index))
        if found:
            return found
    return None


_TIMESTAMP_TYPES = {
    "TIMESTAMP": "arrow_cast({}, 'Timestamp(Microsecond, Some(\"{zone}\"))')",
    "TIMESTAMP_NTZ": "CAST({} AS TIMESTAMP(6))",
}


def for_delta_rs(sql: str, zone: str = "UTC") -> str:
    """Spark's SQL text with its timestamp casts and literals typed as Delta's columns are;
    ``zone``: the session time zone Spark printed TIMESTAMP values in."""
    toks = tokens(sql)
    out: list[str] = []
    at = index = 0
    while index < len(toks):
        token, following = toks[index], toks[index + 1] if index + 1 < len(toks) else None
        after_dot = index > 0 and toks[index - 1].text == "."
        if following is None or after_dot:
            index += 1
        elif token.text == "CAST" and following.text == "(" and following.start == token.end:
            close = following.start + matching_paren(sql[following.start :])
            if close < following.start:
                raise ExpressionError(f"unbalanced parentheses in {sql!r}", fix="pass a SQL string")
            inner = for_delta_rs(sql[following.end : close], zone)
            value, _, type_name = inner.rpartition(" AS ")
            template = _TIMESTAMP_TYPES.get(type_name.strip())
            out += [
                sql[at : token.start],
                template.format(value, zone=zone) if template else f"CAST({inner})",
            ]
            at = close + 1
            index = next((i for i in range(index, len(toks)) if toks[i].start >= at), len(toks))
        elif (
            token.text in _TIMESTAMP_TYPES
            and following.kind == "string"
            and following.start == token.end + 1
        ):
            out += [
                sql[at : token.start],
                _TIMESTAMP_TYPES[token.text].format(following.text, zone=zone),
            ]
            at, index = following.end, index + 2
        else:
            index += 1
    out.append(sql[at:])
    return "".join(out)
