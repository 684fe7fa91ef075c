"""Live views of the lakehouse's Delta tables for the UI, read with delta-rs (no Spark).

Three questions the UI asks of any table, each cheap enough to repeat every couple of seconds
while batches commit: what is in the lakehouse (:meth:`TableReader.summaries`), what arrived
last (:meth:`TableReader.latest_rows`, newest data files first, so it does not scan the whole
table), and how a measure moves over time (:meth:`TableReader.chart`, reading only the two
columns it plots). Column names may reach into structs with dots, e.g. ``window.start`` for a
Spark window column.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import math
import threading
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from deltalake import DeltaTable

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import table as delta_table
from lakefeed.delta.log import rs_table
from lakefeed.observe.errors import TableViewError
from lakefeed.pipeline.expectations import quarantine_table

AGGREGATIONS = {"avg": "mean", "sum": "sum", "min": "min", "max": "max", "count": "count"}
MAX_ROWS = 500
MAX_POINTS = 2000


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """Every column, struct children included as dotted names (``window.start``)."""
    out: list[tuple[str, pa.DataType]] = []

    def walk(prefix: str, fields: list[pa.Field]) -> None:
        for f in fields:
            name = f"{prefix}{f.name}"
            out.append((name, f.type))
            if pa.types.is_struct(f.type):
                walk(f"{name}.", [f.type.field(i) for i in range(f.type.num_fields)])

    walk("", list(schema))
    return out


def _is_time(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t)


def _is_measure(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _field(schema: pa.Schema, name: str) -> tuple[pds.Expression, pa.DataType]:
    types = dict(_columns(schema))
    if name not in types:
        raise TableViewError(f"no column {name!r}; columns: {', '.join(types)}")
    return pds.field(*name.split(".")), types[name]


def _epoch_seconds(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_date(column.type):
        column = column.cast(pa.timestamp("s"))
    micros = column.cast(pa.timestamp("us")).cast(pa.int64()).cast(pa.float64())
    return pc.divide(micros, 1e6)


P = ParamSpec("P")
R = TypeVar("R")


def _serialized(
    method: Callable[Concatenate[TableReader, P], R],
) -> Callable[Concatenate[TableReader, P], R]:
    """One request at a time per reader: a cached handle must not refresh while being read."""

    @functools.wraps(method)
    def locked(self: TableReader, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


class TableReader:
    """Reads the lakehouse's tables, keeping one incrementally refreshed handle per table.

    Shared by the server's request threads; its public methods run one at a time.
    """

    def __init__(self, lakehouse: Lakehouse) -> None:
        self.lakehouse = lakehouse
        self._tables: dict[str, DeltaTable] = {}
        self._lock = threading.RLock()

    def _table(self, name: str) -> DeltaTable:
        if name not in self.lakehouse.table_names():
            raise TableViewError(f"no table {name!r} in {self.lakehouse.root}")
        table = self._tables.get(name)
        try:
            if table is None:
                table = rs_table(str(self.lakehouse.table_path(name)))
            else:
                table.update_incremental()
        except Exception:  # recreated or rewritten under us: open it afresh
            table = rs_table(str(self.lakehouse.table_path(name)))
        self._tables[name] = table
        return table

    def summaries(self) -> list[dict[str, Any]]:
        return [self.summary(name) for name in self.lakehouse.table_names()]

    @_serialized
    def row_count(self, name: str) -> int | None:
        """Rows of the current version from the log's file stats (None if a file has none)."""
        return delta_table.live_rows(self._table(name))

    @_serialized
    def quarantine(self, table: str) -> tuple[str, int | None] | None:
        """``(name, rows)`` of the table's quarantine table, None if it has none (yet)."""
        name = quarantine_table(table)
        if name not in self.lakehouse.table_names():
            return None
        return name, self.row_count(name)

    @_serialized
    def summary(self, name: str) -> dict[str, Any]:
        """Version, rows and files from the Delta log, plus the columns worth charting."""
        table = self._table(name)
        actions = pa.table(table.get_add_actions(flatten=True))
        rows = delta_table.live_rows(table)
        modified = pc.max(actions.column("modification_time")).as_py() if actions.num_rows else None
        columns = _columns(table.to_pyarrow_dataset().schema)
        return {
            "name": name,
            "version": table.version(),
            "rows": rows,
            "files": actions.num_rows,
            "size_bytes": pc.sum(actions.column("size_bytes")).as_py() or 0,
            "last_modified": modified / 1000 if modified is not None else None,
            "columns": [{"name": n, "type": str(t)} for n, t in columns],
            "time_columns": [n for n, t in columns if _is_time(t)],
            "measures": [n for n, t in columns if _is_measure(t)],
        }

    @_serialized
    def latest_rows(
        self, name: str, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any]:
        """The newest ``limit`` rows: from the most recently written files, newest first."""
        limit = max(1, min(limit, MAX_ROWS))
        table = self._table(name)
        dataset = table.to_pyarrow_dataset()
        actions = pa.table(table.get_add_actions(flatten=True))
        paths = actions.column("path").to_pylist()
        mtime = dict(zip(paths, actions.column("modification_time").to_pylist(), strict=True))
        fragments = sorted(
            dataset.get_fragments(), key=lambda f: mtime.get(f.path, 0), reverse=True
        )
        parts: list[pa.Table] = []
        count = 0
        for fragment in fragments:
            part = fragment.to_table(schema=dataset.schema)
            parts.append(part)
            count += part.num_rows
            if count >= limit:
                break
        rows = pa.concat_tables(parts) if parts else dataset.schema.empty_table()
        if order_by:
            expression, _ = _field(dataset.schema, order_by)
            key = pds.dataset(rows).to_table(columns={"k": expression}).column("k")
            rows = rows.take(pc.array_sort_indices(key, order="descending"))
        rows = rows.slice(0, limit)
        return {
            "columns": rows.column_names,
            "rows": [[_jsonable(v) for v in row.values()] for row in rows.to_pylist()],
        }

    @_serialized
    def chart(
        self,
        name: str,
        time: str,
        measure: str,
        agg: str = "avg",
        bucket_s: float = 0,
        points: int = 500,
    ) -> dict[str, Any]:
        """``{"t": [epoch s], "y": [...]}``: ``agg`` of ``measure`` per ``bucket_s`` of ``time``.

        ``bucket_s`` 0 groups by the exact time value (right for a table that already holds one
        row per window and key, like a gold aggregate). The last ``points`` buckets are kept.
        """
        if agg not in AGGREGATIONS:
            raise TableViewError(f"agg must be one of {', '.join(AGGREGATIONS)}, not {agg!r}")
        dataset = self._table(name).to_pyarrow_dataset()
        time_expr, time_type = _field(dataset.schema, time)
        measure_expr, measure_type = _field(dataset.schema, measure)
        if not _is_time(time_type):
            raise TableViewError(f"{time!r} is {time_type}, not a timestamp or date column")
        if agg != "count" and not _is_measure(measure_type):
            raise TableViewError(f"{measure!r} is {measure_type}, not a numeric column")
        data = dataset.to_table(columns={"t": time_expr, "y": measure_expr})
        data = data.filter(pc.is_valid(data.column("t")))
        seconds = _epoch_seconds(data.column("t"))
        if bucket_s > 0:
            seconds = pc.multiply(pc.floor(pc.divide(seconds, float(bucket_s))), float(bucket_s))
        frame = pa.table({"t": seconds.cast(pa.float64()), "y": data.column("y")})
        if pa.types.is_decimal(measure_type):
            frame = frame.set_column(1, "y", frame.column("y").cast(pa.float64()))
        grouped = frame.group_by("t").aggregate([("y", AGGREGATIONS[agg])]).sort_by("t")
        grouped = grouped.slice(max(0, grouped.num_rows - max(1, min(points, MAX_POINTS))))
        return {
            "t": grouped.column("t").to_pylist(),
            "y": [_jsonable(v) for v in grouped.column(1).to_pylist()],
            "time": time,
            "measure": measure,
            "agg": agg,
            "bucket_s": bucket_s,
        }
