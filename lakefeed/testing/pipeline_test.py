"""The test harness: a loaded pipeline whose outside sources are fed batches (see the package)."""

from __future__ import annotations

import functools
import re
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
from lakefeed.core.flow_context import tapping
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import Pipeline
from lakefeed.pipeline.kinds import RunMode
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.results import RunResult
from lakefeed.session import spark_session

Rows = Sequence[Mapping[str, Any]] | DataFrame


@dataclass
class _Feed:
    """One fed source of a flow: the batches waiting, and where they are committed."""

    flow: str
    path: Path
    source: str | None = None  # which of the flow's sources (topic, path, table); None: all
    pending: list[Rows] = field(default_factory=list)
    schema: StructType | None = None  # the replaced source's, learned when the flow evaluates
    committed: int = 0

    @property
    def ready(self) -> bool:
        return self.committed > 0

    def learn(self, original: DataFrame) -> DataFrame:
        """Take the replaced source's schema, unless the test gave one."""
        self.schema = self.schema or original.schema
        return original

    def takes(self, names: tuple[str, ...]) -> bool:
        return self.source is None or self.source in names


@dataclass
class _Tap:
    """Stands in for a flow's outside sources, however its code reads them (``lf.source``,
    ``lf.read_kafka``, or ``spark.readStream.format(...).load()`` / ``.table(...)`` in a DLT or
    SDP file): a source a feed takes becomes that feed's table; one several feeds take by name
    (the topics of one subscription) becomes their union."""

    spark: SparkSession
    feeds: list[_Feed] = field(default_factory=list)

    def __call__(
        self, read: Callable[[], DataFrame], names: tuple[str, ...], streaming: bool | None
    ) -> DataFrame:
        takers = [f for f in self.feeds if f.takes(names)]
        named = [f for f in takers if f.source is not None]
        feeds = named or takers[:1]  # fed by name first: each topic of a multi-topic source
        if not feeds:
            return read()
        if any(f.schema is None or not f.ready for f in feeds) or streaming is None:
            original = read()
            for feed in feeds:
                feed.learn(original)
            if not all(f.ready for f in feeds):
                return original  # validation before the first step: the real source's shape
            streaming = original.isStreaming
        return functools.reduce(DataFrame.unionByName, [self._fed(f, streaming) for f in feeds])

    def _fed(self, feed: _Feed, streaming: bool) -> DataFrame:
        """A feed's table: one fed batch per micro-batch, in order, when streaming."""
        path = str(feed.path)
        if streaming:
            return delta.read_stream(self.spark, path, maxFilesPerTrigger="1")
        return delta.read(self.spark, path)


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
        self._taps: dict[str, _Tap] = {}

    def feed(
        self,
        flow: str,
        rows: Rows,
        *,
        schema: StructType | None = None,
        source: str | None = None,
    ) -> None:
        """One micro-batch for ``flow``'s outside source (the next ``step`` processes it);
        ``source`` picks one of several by Kafka topic, path or table name. A dataset's flow
        may be named as in :meth:`rows` (``db.x`` in the pipeline's database)."""
        flow = self.pipeline.namespace.local(flow) or flow  # an append flow's name is one part
        key = flow if source is None else f"{flow}[{source}]"
        if key not in self._feeds:
            tap = self._tap(flow)  # first: a flow the pipeline lacks leaves no feed behind
            folder = self.root / "feeds" / f"{len(self._feeds)}-{_folder(key)}"
            self._feeds[key] = _Feed(flow, folder, source, schema=schema)
            tap.feeds.append(self._feeds[key])
        self._feeds[key].pending.append(rows)

    def step(self) -> RunResult:
        """Process every fed batch (one micro-batch each, in order) in every flow, then stop."""
        if any(f.schema is None for f in self._feeds.values()):
            entry.validate(self.pipeline, lakehouse=self.lakehouse, spark=self.spark)
        for feed in self._feeds.values():
            self._commit(feed)
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
        """The rows of ``table`` (a table or materialized view of the pipeline; ``x``,
        ``db.x`` or ``cat.db.x`` in the pipeline's database, see :mod:`lakefeed.pipeline.names`)."""
        path = self.lakehouse.table_path(self._local(table, "rows"))
        if not (path / "_delta_log").is_dir():
            return []
        found = DeltaTable(str(path)).to_pyarrow_table()
        if order_by:
            found = found.sort_by([(c, "ascending") for c in order_by])
        return found.to_pylist()

    def quarantine(self, table: str) -> list[dict[str, Any]]:
        """The rows ``table``'s drop rules sent to its quarantine table."""
        quarantine = self.pipeline.datasets[self._local(table, "quarantine")].quarantine
        return self.rows(quarantine) if quarantine else []

    def expectations(self, table: str) -> dict[str, dict[str, int]]:
        """Per rule of ``table``: rows ``passed`` and ``failed`` over every batch so far."""
        table = self._local(table, "expectations")
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

    def _local(self, table: str, method: str) -> str:
        """The pipeline's table ``table`` names, as its lakehouse keeps it; a name of another
        database is refused (PIPELINE_OTHER_DATABASE): it is no table of this pipeline."""
        return self.pipeline.namespace.own(table, f"PipelineTest.{method}({table!r})")

    def _tap(self, flow: str) -> _Tap:
        """The tap of ``flow`` (a dataset or an append flow), put around its function once."""
        if flow not in self._taps:
            target = self.pipeline.datasets.get(flow) or self.pipeline.append_flows.get(flow)
            if target is None:
                known = sorted([*self.pipeline.datasets, *self.pipeline.append_flows])
                raise ConfigError(f"the pipeline has no flow {flow!r}", fix=f"feed one of {known}")
            self._taps[flow] = _Tap(self.spark)
            target.func = _fed(target.func, self._taps[flow])
        return self._taps[flow]

    def _commit(self, feed: _Feed) -> None:
        """Each pending batch as one Delta commit of one file: one micro-batch."""
        if feed.schema is None:
            which = "no outside source" if feed.source is None else f"no source {feed.source!r}"
            raise ConfigError(
                f"flow {feed.flow!r} read {which} (lf.source, lf.read_kafka, lf.read_files, "
                "spark.readStream.format(...).load(), spark.readStream.table(...)), so there "
                "is nothing to feed",
                fix="feed the flow that reads the outside source; source= names it by Kafka "
                "topic, path or table name",
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


def _folder(key: str) -> str:
    """A feed's key as a folder name: anything but letters, digits, ``-`` and ``_`` as ``_``."""
    return re.sub(r"[^\w-]", "_", key)


def _fed(func: Callable[[], DataFrame], tap: _Tap) -> Callable[[], DataFrame]:
    def fed() -> DataFrame:
        with tapping(tap):
            return func()

    return fed
