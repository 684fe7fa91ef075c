"""The test harness: a loaded pipeline whose outside sources are fed batches (see the package)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakefeed import entry
from lakefeed.connectors import delta
from lakefeed.core.errors import ConfigError
from lakefeed.core.flow_context import Resolver, current_resolver, resolving
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import Pipeline
from lakefeed.pipeline.kinds import RunMode
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.results import RunResult
from lakefeed.session import spark_session

Rows = Sequence[Mapping[str, Any]] | DataFrame


@dataclass
class _Feed:
    """One flow's fed source: the batches waiting, and where they are committed."""

    path: Path
    pending: list[Rows] = field(default_factory=list)
    schema: StructType | None = None  # the replaced source's, learned when the flow evaluates
    committed: int = 0

    @property
    def ready(self) -> bool:
        return self.committed > 0


class _FeedingResolver:
    """Resolves ``lf.read*`` as the runtime does; an outside source becomes the fed table."""

    def __init__(self, inner: Resolver, feed: _Feed) -> None:
        self.inner, self.feed = inner, feed

    def read(self, name: str, streaming: bool, options: Mapping[str, str]) -> DataFrame:
        return self.inner.read(name, streaming, options)

    def source(self, fmt: str, path: str | None, options: Mapping[str, str]) -> DataFrame:
        original = self.inner.source(fmt, path, options)
        self.feed.schema = self.feed.schema or original.schema
        if not self.feed.ready:
            return original  # validation before the first step: the real source's shape
        spark = original.sparkSession
        if original.isStreaming:  # one fed batch per micro-batch, in order
            return delta.read_stream(spark, str(self.feed.path), maxFilesPerTrigger="1")
        return delta.read(spark, str(self.feed.path))


class PipelineTest:
    """A pipeline under test: ``feed`` batches, ``step``, then read ``rows`` and counts."""

    def __init__(
        self,
        pipeline: str | Path | Sequence[str | Path],
        root: str | Path,
        *,
        spark: SparkSession | None = None,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.lakehouse = Lakehouse.at(self.root / "lakehouse")
        # The session first: the pipeline's files may use Spark at import, as in DLT and SDP.
        # ``conf`` alone is its configuration: nothing an earlier pipeline set carries over.
        name = entry.find(pipeline, conf or {}).name
        self.spark = spark or spark_session(app_name=f"lakefeed-test-{name}")
        self.pipeline: Pipeline = entry.load(pipeline, spark=self.spark)
        self._feeds: dict[str, _Feed] = {}

    def feed(self, flow: str, rows: Rows, *, schema: StructType | None = None) -> None:
        """One micro-batch for ``flow``'s outside source (the next ``step`` processes it)."""
        dataset = self.pipeline.datasets.get(flow)
        if dataset is None:
            raise ConfigError(
                f"the pipeline has no flow {flow!r}",
                fix=f"feed one of {sorted(self.pipeline.datasets)}",
            )
        if flow not in self._feeds:
            self._feeds[flow] = _Feed(self.root / "feeds" / flow, schema=schema)
            dataset.func = _fed(dataset.func, self._feeds[flow])
        self._feeds[flow].pending.append(rows)

    def step(self) -> RunResult:
        """Process every fed batch (one micro-batch each, in order) in every flow, then stop."""
        if any(f.schema is None for f in self._feeds.values()):
            entry.validate(self.pipeline, lakehouse=self.lakehouse, spark=self.spark)
        for flow, feed in self._feeds.items():
            self._commit(flow, feed)
        result = entry.run(
            self.pipeline,
            lakehouse=self.lakehouse,
            spark=self.spark,
            mode=RunMode.AVAILABLE_NOW,
        )
        if not result.ok:
            failed = [f"{f.name}: {f.error}" for f in result.flows if f.error]
            raise AssertionError(f"the pipeline run failed: {failed or result.reason}")
        return result

    def rows(self, table: str, order_by: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The rows of ``table`` (a table or materialized view of the pipeline)."""
        path = self.lakehouse.table_path(table)
        if not (path / "_delta_log").is_dir():
            return []
        found = DeltaTable(str(path)).to_pyarrow_table()
        if order_by:
            found = found.sort_by([(c, "ascending") for c in order_by])
        return found.to_pylist()

    def quarantine(self, table: str) -> list[dict[str, Any]]:
        """The rows ``table``'s drop rules sent to its quarantine table."""
        quarantine = self.pipeline.datasets[table].quarantine
        return self.rows(quarantine) if quarantine else []

    def expectations(self, table: str) -> dict[str, dict[str, int]]:
        """Per rule of ``table``: rows ``passed`` and ``failed`` over every batch so far."""
        totals: dict[str, dict[str, int]] = {}
        for event in read_events(self.lakehouse.event_log_path, event_types=["expectations"]):
            details = event.get("details") or {}
            if details.get("table") != table:
                continue
            for rule, counts in details.get("rules", {}).items():
                total = totals.setdefault(rule, {"passed": 0, "failed": 0})
                total["passed"] += int(counts["passed"])
                total["failed"] += int(counts["failed"])
        return totals

    def _commit(self, flow: str, feed: _Feed) -> None:
        """Each pending batch as one Delta commit of one file: one micro-batch."""
        if feed.schema is None:
            raise ConfigError(
                f"flow {flow!r} read no outside source (lf.source, lf.read_kafka, "
                "lf.read_files), so there is nothing to feed",
                fix="feed the flow that reads the outside source",
            )
        arrow = pa.schema(
            [f.with_nullable(True) for f in to_arrow_schema(feed.schema, timezone="UTC")]
        )
        for rows in feed.pending:
            table = _arrow(rows, arrow)
            write_deltalake(str(feed.path), table, mode="append", schema_mode="merge")
            feed.committed += 1
        feed.pending.clear()


def _arrow(rows: Rows, schema: pa.Schema) -> pa.Table:
    if isinstance(rows, DataFrame):
        return rows.toArrow()
    complete = [{name: row.get(name) for name in schema.names} for row in rows]
    return pa.Table.from_pylist(complete, schema=schema)


def _fed(func: Callable[[], DataFrame], feed: _Feed) -> Callable[[], DataFrame]:
    def fed() -> DataFrame:
        with resolving(_FeedingResolver(current_resolver(), feed)):
            return func()

    return fed
