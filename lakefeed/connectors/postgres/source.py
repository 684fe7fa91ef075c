"""``format("lakefeed_postgres")``: a PostgreSQL table or query as a batch DataFrame, jar-free.

For enrichment (a stream joined with reference data in PostgreSQL) and backfills, without the
JDBC driver on Spark's classpath. Spark plans the static side of a stream–static join again for
every micro-batch, so each batch reads the table as it is then: a changed row is seen by the
next batch.

Options, named as Spark's JDBC source names them: ``url`` (libpq URI; put the password in
``PGPASSWORD`` or ``~/.pgpass`` rather than in the URL — options show in Spark's plans) and
``dbtable`` or ``query``; ``partitionColumn`` with ``lowerBound``, ``upperBound`` and
``numPartitions`` splits the read into ranges of an integer column, one task each; ``fetchsize``
(10000) rows per round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from lakefeed.connectors.postgres.errors import BAD_OPTION
from lakefeed.connectors.postgres.sink import check_name, connect
from lakefeed.core.errors import OptionError
from lakefeed.core.options import Options

FORMAT = "lakefeed_postgres"

# PostgreSQL type name (``pg_type.typname``) -> Arrow type; anything else is read as text.
_TYPES: dict[str, pa.DataType] = {
    "int2": pa.int16(),
    "int4": pa.int32(),
    "int8": pa.int64(),
    "float4": pa.float32(),
    "float8": pa.float64(),
    "bool": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "bytea": pa.binary(),
}


@dataclass(frozen=True)
class Query:
    url: str
    select: str  # a SELECT over the table or the user's query
    fetch_size: int


@dataclass(frozen=True)
class Range(InputPartition):
    where: str  # "" for the whole query


def parse(options: Options) -> tuple[Query, list[Range]]:
    url = options.get("url")
    table, query = options.get("dbtable"), options.get("query")
    if not url or bool(table) == bool(query):
        raise OptionError(
            "lakefeed_postgres needs option url and exactly one of dbtable or query",
            fix='e.g. .option("url", "postgresql://app@db/shop").option("dbtable", "customers")',
            code=BAD_OPTION,
        )
    if table:
        check_name(table, "table", parts=2)
    select = f"SELECT * FROM {table}" if table else f"SELECT * FROM ({query}) AS q"
    fetch = options.positive_int("fetchsize") or 10_000
    return Query(url, select, fetch), _ranges(options)


def _ranges(options: Options) -> list[Range]:
    column = options.get("partitionColumn")
    if not column:
        return [Range("")]
    check_name(column, "partitionColumn")
    lower, upper = options.integer("lowerBound"), options.integer("upperBound")
    parts = options.positive_int("numPartitions")
    if lower is None or upper is None or parts is None or upper <= lower:
        raise OptionError(
            "partitionColumn needs lowerBound < upperBound and numPartitions",
            fix="set all four, as for Spark's JDBC source",
            code=BAD_OPTION,
        )
    step = max(1, (upper - lower) // parts)
    cuts = [lower + i * step for i in range(1, parts)]
    ranges = [f"{column} < {cuts[0]} OR {column} IS NULL"] if cuts else []
    ranges += [f"{column} >= {a} AND {column} < {b}" for a, b in zip(cuts, cuts[1:], strict=False)]
    ranges += [f"{column} >= {cuts[-1]}"] if cuts else [""]
    return [Range(r) for r in ranges]


def arrow_schema(query: Query) -> pa.Schema:
    """The query's columns, typed from PostgreSQL's catalog (no row is read)."""
    with connect(query.url) as conn:
        cursor = conn.execute(f"{query.select} LIMIT 0")
        oids = [c.type_code for c in cursor.description or ()]
        names = [c.name for c in cursor.description or ()]
        types: dict[int, str] = dict(
            conn.execute("SELECT oid, typname FROM pg_type WHERE oid = ANY(%s)", [oids]).fetchall()
        )
    return pa.schema(
        [
            pa.field(n, _TYPES.get(types.get(o, ""), pa.string()))
            for n, o in zip(names, oids, strict=True)
        ]
    )


def read_range(query: Query, where: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    select = f"SELECT * FROM ({query.select}) AS r WHERE {where}" if where else query.select
    text = {f.name for f in schema if pa.types.is_string(f.type)}
    with connect(query.url) as conn, conn.cursor(name="lakefeed_read") as cur:
        cur.itersize = query.fetch_size
        cur.execute(select)
        while rows := cur.fetchmany(query.fetch_size):
            columns = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([_text(v) for v in col] if f.name in text else col, f.type)
                    for col, f in zip(columns, schema, strict=True)
                ],
                schema=schema,
            )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class PostgresDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        query, _ = parse(Options(self.options))
        return from_arrow_schema(arrow_schema(query))

    def reader(self, schema: StructType) -> DataSourceReader:
        return PostgresReader(Options(self.options), schema)


class PostgresReader(DataSourceReader):
    def __init__(self, options: Options, schema: StructType) -> None:
        self.query, self.ranges = parse(options)
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return self.ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Range)
        arrow = to_arrow_schema(self.schema, timezone="UTC")
        nullable = pa.schema([f.with_nullable(True) for f in arrow])
        yield from read_range(self.query, partition.where, nullable)
