"""Landed files read by lakefeed's Arrow reader inside a planned stream, parsing only what the
flow uses (``lakefeed.reader=arrow``).

The stream's offsets and file log are the planned stream's (:mod:`lakefeed.spark.jvm.bridge`);
each batch is a ``mapInArrow`` over a small local table naming each task's files, so the files
are parsed on executors by :func:`~lakefeed.connectors.files.readers.read_entry` (rescued data,
schema evolution, skipped files, ``_metadata``: all as lakefeed's Python reader) and cross to
the JVM once, as Arrow. At the query's first batch the flow's optimized plan says which
columns it reads and which filters sit on the source (:mod:`~lakefeed.connectors.files.pushdown`):
columns nobody reads are never parsed and rows a filter drops are never built; Spark keeps
evaluating every filter itself, so the result is the same with or without them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField

from lakefeed.connectors.files.filelog import FileEntry
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.pushdown import NONE, Pushdown, from_plan
from lakefeed.core.logs import get_logger

log = get_logger("lakefeed.connectors.files")


def flow_pushdown(spark: SparkSession, description: str, names: Sequence[str]) -> Pushdown:
    """The pushdown of the one running query reading the source named ``description``;
    nothing narrowed when none or several do, or when the plan cannot be read."""
    try:
        queries = [q for q in spark.streams.active if _reads(q, description)]
        if len(queries) != 1:
            return NONE
        execution = queries[0]._jsq.streamingQuery()
        optimizer = spark._jsparkSession.sessionState().optimizer()
        return from_plan(optimizer.execute(execution.logicalPlan()).toJSON(), names)
    except Exception as exc:  # noqa: BLE001 - a plan we cannot read narrows nothing, never fails
        log.warning("cloudFiles pushdown skipped", extra={"source": description, "error": str(exc)})
        return NONE


def _reads(query: object, description: str) -> bool:
    sources = query._jsq.streamingQuery().sources()  # type: ignore[attr-defined]
    return any(str(sources.apply(i).toString()) == description for i in range(sources.size()))


class ArrowFiles:
    """Each batch's files as a DataFrame read by the Arrow reader on executors."""

    def __init__(self, spark: SparkSession, plan: ReadPlan, description: str) -> None:
        self._spark = spark
        self._plan = plan
        self._description = description
        self._narrowed: ReadPlan | None = None  # decided at the first batch, when it runs
        self._columns: list[Column] = []  # the stream's columns over the read ones, made once

    def plan(self) -> ReadPlan:
        if self._narrowed is None:
            pushdown = flow_pushdown(self._spark, self._description, self._plan.output.names)
            self._narrowed = replace(self._plan, pushdown=pushdown)
            log.info(
                "cloudFiles Arrow reader",
                extra={
                    "source": self._description,
                    "columns": None if pushdown.columns is None else sorted(pushdown.columns),
                    "filters": [f"{p.column} {p.op} {p.value!r}" for p in pushdown.filters],
                    "kept_in_spark": list(pushdown.not_pushed),
                },
            )
        return self._narrowed

    def frame(self, parts: Sequence[Sequence[FileEntry]]) -> DataFrame:
        """The rows of ``parts`` (one task each) in the stream's schema; columns the flow
        does not read are typed nulls Spark prunes."""
        plan = self.plan()
        texts = [json.dumps([[e.path, e.size, e.mtime_ms] for e in part]) for part in parts]
        jspark = self._spark._jsparkSession
        strings = self._spark._jvm.org.apache.spark.sql.Encoders.STRING()  # type: ignore[union-attr]
        # A local relation: the planned source marks it as the stream's data.
        listing = DataFrame(jspark.createDataset(texts, strings).toDF(), self._spark)
        rows = listing.mapInArrow(read_tasks(plan), plan.kept)
        if not self._columns:  # each costs Py4J round trips: a batch reuses them
            self._columns = [_column(plan, field) for field in plan.output.fields]
        return rows.select(*self._columns)


def _column(plan: ReadPlan, field: StructField) -> Column:
    """``field`` as read, or a typed null when the flow does not read it (Spark prunes it)."""
    if plan.wants(field.name):
        return F.col(f"`{field.name}`")
    return F.lit(None).cast(field.dataType).alias(field.name)


def read_tasks(plan: ReadPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: each input row lists one task's files."""

    def read(listings: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lakefeed.connectors.files.readers import read_entry  # executors only: see plan.py

        for listing in listings:
            for text in listing.column(0).to_pylist():
                for path, size, mtime_ms in json.loads(text):
                    yield from read_entry(FileEntry(path, size, mtime_ms), plan)

    return read
