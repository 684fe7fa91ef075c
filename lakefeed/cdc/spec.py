"""An AUTO CDC flow as declared: DLT's parameters, checked where they are written.

What can be checked without data is refused at declaration (``CDC_INVALID``): both ``column_list``
and ``except_column_list``, an SCD type other than 1 or 2, history tracking or truncates outside the
type that has them. What needs the source's columns (unknown keys, a ``sequence_by`` that does not
resolve) is checked by ``lakefeed validate`` before any query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakefeed.cdc.errors import INVALID
from lakefeed.core.errors import PipelineDefinitionError

START_AT = "__START_AT"
END_AT = "__END_AT"
STATE_SUFFIX = "__cdc_state"


def state_table(target: str) -> str:
    """The side table holding each key's newest sequence and its deletes (DLT's tombstones)."""
    return f"{target}{STATE_SUFFIX}"


def scd_type(value: Any) -> int:
    """DLT accepts ``1``, ``2``, ``"1"`` and ``"2"``."""
    if str(value).strip() not in ("1", "2"):
        raise PipelineDefinitionError(
            f"stored_as_scd_type={value!r} is not supported",
            fix="use stored_as_scd_type=1 (current rows) or 2 (history)",
            code=INVALID,
        )
    return int(str(value).strip())


def _is_column(value: Any) -> bool:
    from pyspark.sql import Column  # classic and Spark Connect Columns alike (pyspark 4)

    return isinstance(value, Column)


def _expression(value: Any, what: str) -> Any:
    """A sequence or condition as DLT takes it: SQL text or a Column (``col()``, ``expr()``);
    anything else is refused here, not by Spark at the first batch (what the Column means is
    checked against the source's columns by ``lakefeed validate``)."""
    if value is None or isinstance(value, str) or _is_column(value):
        return value
    raise PipelineDefinitionError(
        f"{what}={value!r} is a {type(value).__name__}, not SQL text or a Column",
        fix=f'write {what}="seq" or {what}=col("seq") (a condition: expr("op = \'DELETE\'"))',
        code=INVALID,
    )


def _names(value: Sequence[Any] | None, what: str) -> list[str]:
    """Column names given as strings or plain Columns (``F.col("id")``), in a list as DLT has
    them (a bare string would be read letter by letter)."""
    if value is not None and not isinstance(value, list | tuple):
        raise PipelineDefinitionError(
            f"{what}={value!r} is not a list",
            fix=f"give a list: {what}=['id'] or {what}=[col('id')]",
            code=INVALID,
        )
    names = []
    for item in value or []:
        name = item if isinstance(item, str) else _column_name(item)
        if name is None:
            raise PipelineDefinitionError(
                f"{what}: {item!r} is not a column name",
                fix="give unqualified column names, e.g. ['id'] or [F.col('id')]",
                code=INVALID,
            )
        names.append(name)
    return names


def _column_name(column: Any) -> str | None:
    """The name of a plain column reference (classic or Spark Connect), else None."""
    jc = getattr(column, "_jc", None)
    text = str(jc.toString()) if jc is not None else str(getattr(column, "_expr", ""))
    text = text.strip("`'\"")
    return text if text.replace("_", "a").isalnum() else None


@dataclass(frozen=True)
class AutoCdc:
    """One AUTO CDC flow: ``source`` (a dataset of the pipeline) applied to its target."""

    source: str
    keys: list[str]
    sequence_by: Any  # SQL text or a Column
    ignore_null_updates: bool = False
    apply_as_deletes: Any = None
    apply_as_truncates: Any = None
    column_list: list[str] = field(default_factory=list)
    except_column_list: list[str] = field(default_factory=list)
    scd_type: int = 1
    track_history_column_list: list[str] = field(default_factory=list)
    track_history_except_column_list: list[str] = field(default_factory=list)

    @classmethod
    def declare(cls, where: str, **given: Any) -> AutoCdc:
        """Build from DLT's keyword arguments; what is wrong is refused with the fix."""
        cdc = cls(
            source=given["source"],
            keys=_names(given["keys"], "keys"),
            sequence_by=_expression(given["sequence_by"], "sequence_by"),
            ignore_null_updates=bool(given.get("ignore_null_updates")),
            apply_as_deletes=_expression(given.get("apply_as_deletes"), "apply_as_deletes"),
            apply_as_truncates=_expression(given.get("apply_as_truncates"), "apply_as_truncates"),
            column_list=_names(given.get("column_list"), "column_list"),
            except_column_list=_names(given.get("except_column_list"), "except_column_list"),
            scd_type=scd_type(given.get("stored_as_scd_type") or 1),
            track_history_column_list=_names(
                given.get("track_history_column_list"), "track_history_column_list"
            ),
            track_history_except_column_list=_names(
                given.get("track_history_except_column_list"), "track_history_except_column_list"
            ),
        )
        problems = cdc.problems()
        if problems:
            raise PipelineDefinitionError(
                f"AUTO CDC flow ({where}): " + "; ".join(problems), code=INVALID
            )
        return cdc

    def problems(self) -> list[str]:
        problems = []
        if not self.keys:
            problems.append("keys is empty: name the columns identifying a row")
        if self.sequence_by is None or (isinstance(self.sequence_by, str) and not self.sequence_by):
            problems.append("sequence_by is missing: name the column ordering the changes")
        if self.column_list and self.except_column_list:
            problems.append("give column_list or except_column_list, not both")
        if self.track_history_column_list and self.track_history_except_column_list:
            problems.append(
                "give track_history_column_list or track_history_except_column_list, not both"
            )
        tracking = self.track_history_column_list or self.track_history_except_column_list
        if tracking and self.scd_type != 2:
            problems.append("track_history_* needs stored_as_scd_type=2")
        if self.apply_as_truncates is not None and self.scd_type != 1:
            problems.append("apply_as_truncates works with stored_as_scd_type=1 only (as in DLT)")
        return problems

    def columns(self, source: Sequence[str]) -> list[str]:
        """The target's user columns, in the source's order (``column_list``'s when given)."""
        if self.column_list:
            return list(self.column_list)
        return [c for c in source if c not in self.except_column_list]

    def tracked(self, columns: Sequence[str]) -> list[str]:
        """SCD2: the columns whose change opens a new version (others update it in place)."""
        if self.track_history_column_list:
            return list(self.track_history_column_list)
        skip = set(self.keys) | set(self.track_history_except_column_list)
        return [c for c in columns if c not in skip]

    def column_problems(self, source: Sequence[str]) -> list[str]:
        """Names that are not columns of the source (checked by ``lakefeed validate``)."""
        problems: list[str] = []
        chosen = self.columns(source)
        for what, names, pool in (
            ("key", self.keys, source),
            ("column_list column", self.column_list, source),
            ("except_column_list column", self.except_column_list, source),
            ("track_history column", self.track_history_column_list, chosen),
            ("track_history_except column", self.track_history_except_column_list, chosen),
        ):
            problems.extend(
                f"{what} {name!r} is not among the columns {list(pool)}"
                for name in names
                if name not in pool
            )
        problems.extend(
            f"key {k!r} is left out of the target by column_list/except_column_list"
            for k in self.keys
            if k in source and k not in chosen
        )
        reserved = [c for c in (START_AT, END_AT) if c in chosen and self.scd_type == 2]
        problems.extend(f"column {c!r} is reserved for SCD type 2 history" for c in reserved)
        return problems
