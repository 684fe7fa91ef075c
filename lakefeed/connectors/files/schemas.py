"""Schema inference, hints and the versioned schema store under ``cloudFiles.schemaLocation``.

Spark-free (``pyspark.sql.types`` is plain Python): inference runs in the Python process that
plans the query, and evolution runs on executors when a file brings new columns.

Layout, like Auto Loader's: ``<schemaLocation>/_schemas/<version>`` holds the data schema (JSON)
of that version, in a local folder or under an ``s3://`` prefix alike. A restart reads the
newest version, so it sees the same columns the previous run settled on, plus any columns a
failed batch added on the way out.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lakefeed.connectors.files.options import FileSourceOptions, OptionError
from lakefeed.core import storage

METADATA_COLUMN = "_metadata"
METADATA_TYPE = StructType(
    [
        StructField("file_path", StringType(), False),
        StructField("file_name", StringType(), False),
        StructField("file_size", LongType(), False),
        StructField("file_modification_time", TimestampType(), False),
    ]
)


# ---------------------------------------------------------------------------- type inference


def value_type(value: object) -> DataType:
    """The Spark type a JSON value asks for (``NullType`` for null: decided by other rows)."""
    if value is None:
        return NullType()
    if isinstance(value, bool):
        return BooleanType()
    if isinstance(value, int):
        return LongType()
    if isinstance(value, float):
        return DoubleType()
    if isinstance(value, dict):
        return StructType([StructField(k, value_type(v)) for k, v in value.items()])
    if isinstance(value, list):
        element: DataType = NullType()
        for item in value:
            element = merge_types(element, value_type(item))
        return ArrayType(element)
    return StringType()


def merge_types(a: DataType, b: DataType) -> DataType:
    """Widen like Spark's JSON inference: long+double→double, anything else mixed→string."""
    if isinstance(a, NullType):
        return b
    if isinstance(b, NullType) or a == b:
        return a
    numeric = (LongType, DoubleType)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return DoubleType()
    if isinstance(a, StructType) and isinstance(b, StructType):
        return merge_struct(a, b)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(merge_types(a.elementType, b.elementType))
    return StringType()


def merge_struct(a: StructType, b: StructType) -> StructType:
    """Fields of ``a`` in order (types widened), then the fields only ``b`` has."""
    theirs = {f.name: f.dataType for f in b.fields}
    fields = [
        StructField(f.name, merge_types(f.dataType, theirs.get(f.name, NullType()))) for f in a
    ]
    known = {f.name for f in a.fields}
    fields += [StructField(f.name, f.dataType) for f in b.fields if f.name not in known]
    return StructType(fields)


def settle(dtype: DataType) -> DataType:
    """Replace types still unknown (only nulls seen) by string, recursively."""
    if isinstance(dtype, NullType):
        return StringType()
    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, settle(f.dataType)) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(settle(dtype.elementType))
    return dtype


def json_records(data: bytes, multi_line: bool) -> Iterable[object]:
    """Parsed JSON records of a file; malformed lines are skipped here (inference only)."""
    if multi_line:
        try:
            doc = json.loads(data)
        except ValueError:
            return []
        return doc if isinstance(doc, list) else [doc]
    records = []
    for line in data.splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def _infer_json(path: str, opts: FileSourceOptions) -> StructType:
    schema = StructType([])
    for record in json_records(storage.read_bytes(path), opts.multi_line):
        if isinstance(record, dict):
            schema = merge_struct(schema, value_type(record))  # type: ignore[arg-type]
    if not opts.infer_column_types:
        # Auto Loader's default: every column a string, so a type change never breaks the stream.
        return StructType([StructField(f.name, StringType()) for f in schema.fields])
    return schema


def _infer_csv(path: str, opts: FileSourceOptions) -> StructType:
    data = storage.read_bytes(path)
    names = csv_text_header(data, opts)
    if not opts.infer_column_types:
        return StructType([StructField(n, StringType()) for n in names])
    table = pacsv.read_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=1 if opts.header else 0),
        parse_options=pacsv.ParseOptions(
            delimiter=opts.sep, quote_char=opts.quote, invalid_row_handler=lambda _: "skip"
        ),
    )
    return StructType([arrow_field(f) for f in table.schema])


def arrow_field(field: pa.Field) -> StructField:
    dtype = field.type
    if pa.types.is_null(dtype):
        return StructField(field.name, NullType())
    if pa.types.is_large_string(dtype):
        dtype = pa.string()
    if pa.types.is_timestamp(dtype) and dtype.tz is None:
        # Spark's Parquet reader maps naive timestamps to TIMESTAMP too.
        dtype = pa.timestamp("us", tz="UTC")
    return StructField(field.name, from_arrow_type(dtype))


def _infer_parquet(path: str, opts: FileSourceOptions) -> StructType:
    import pyarrow.parquet as pq  # only Parquet inference needs it: keep planning imports light

    fs, inner = storage.filesystem(path)
    return StructType([arrow_field(f) for f in pq.read_schema(inner, filesystem=fs)])


def infer_schema(paths: Sequence[str], opts: FileSourceOptions) -> StructType:
    """The data schema of a sample of files (no rescue or metadata columns).

    A file that cannot be read is left out of the sample: reading it in a batch reports it
    (skip or fail per ``ignoreCorruptFiles``), which is where the user decides.
    """
    infer = {"json": _infer_json, "csv": _infer_csv, "parquet": _infer_parquet}[opts.format]
    schema = StructType([])
    for path in paths:
        try:
            schema = merge_struct(schema, infer(path, opts))
        except (OSError, pa.ArrowException, UnicodeDecodeError):
            continue
    return settle(schema)  # type: ignore[return-value]


# ------------------------------------------------------------------------------- DDL / hints

_SIMPLE: dict[str, DataType] = {
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "smallint": ShortType(),
    "short": ShortType(),
    "tinyint": ByteType(),
    "byte": ByteType(),
    "double": DoubleType(),
    "float": FloatType(),
    "real": FloatType(),
    "boolean": BooleanType(),
    "bool": BooleanType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
    "binary": BinaryType(),
}
_TOKEN = re.compile(r"\s*(`[^`]*`|[A-Za-z_][A-Za-z0-9_.]*|\d+|[<>(),:])")


class _DDL:
    """Recursive-descent parser for Spark DDL: ``a INT, b STRUCT<c: STRING>, d DECIMAL(10,2)``.

    Spark's own parser needs a JVM; schema hints are parsed where there is none.
    """

    def __init__(self, text: str):
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if not match:
                raise OptionError(f"cannot parse schema {text!r} near {text[pos : pos + 20]!r}")
            self.tokens.append(match.group(1))
            pos = match.end()
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.lower() != expected):
            raise OptionError(
                f"cannot parse schema {self.text!r}: expected {expected or 'more'}, got {token!r}"
            )
        self.pos += 1
        return token

    def fields(self, end: str | None) -> list[StructField]:
        out = []
        while self.peek() is not None and self.peek() != end:
            name = self.take().strip("`")
            if self.peek() == ":":
                self.take(":")
            nullable = True
            dtype = self.dtype()
            if (self.peek() or "").lower() == "not":
                self.take("not")
                self.take("null")
                nullable = False
            out.append(StructField(name, dtype, nullable))
            if self.peek() == ",":
                self.take(",")
        return out

    def dtype(self) -> DataType:
        word = self.take().lower()
        if word in _SIMPLE:
            if self.peek() == "(" and word in ("varchar", "char"):
                self.take("(")
                self.take()
                self.take(")")
            return _SIMPLE[word]
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take("(")
                precision = int(self.take())
                if self.peek() == ",":
                    self.take(",")
                    scale = int(self.take())
                self.take(")")
            return DecimalType(precision, scale)
        if word == "array":
            self.take("<")
            element = self.dtype()
            self.take(">")
            return ArrayType(element)
        if word == "map":
            self.take("<")
            key = self.dtype()
            self.take(",")
            value = self.dtype()
            self.take(">")
            return MapType(key, value)
        if word == "struct":
            self.take("<")
            fields = self.fields(">")
            self.take(">")
            return StructType(fields)
        raise OptionError(f"unknown type {word!r} in schema {self.text!r}")


def parse_ddl(text: str) -> StructType:
    """A DDL column list (``"id BIGINT, tags ARRAY<STRING>"``) or a schema's JSON."""
    if text.lstrip().startswith("{"):
        parsed = StructType.fromJson(json.loads(text))
        return parsed
    parser = _DDL(text)
    fields = parser.fields(None)
    if parser.peek() is not None:
        raise OptionError(f"cannot parse schema {text!r} near {parser.peek()!r}")
    return StructType(fields)


def apply_hints(schema: StructType, hints: str | None) -> StructType:
    """``cloudFiles.schemaHints`` win over inferred types; hinted columns not seen are added."""
    if not hints:
        return schema
    hinted = {f.name: f for f in parse_ddl(hints).fields}
    fields = [hinted.pop(f.name, f) for f in schema.fields]
    return StructType(fields + list(hinted.values()))


def output_schema(
    data: StructType, rescue_column: str | None, include_metadata: bool
) -> StructType:
    """What the stream returns: data columns, then the rescued-data and metadata columns."""
    fields = list(data.fields)
    if rescue_column:
        fields.append(StructField(rescue_column, StringType()))
    if include_metadata:
        fields.append(StructField(METADATA_COLUMN, METADATA_TYPE, False))
    return StructType(fields)


# ----------------------------------------------------------------------------- schema store


class SchemaStore:
    """Versioned data schemas under ``<schemaLocation>/_schemas``."""

    def __init__(self, location: str | Path):
        self.folder = storage.as_path(str(location)) / "_schemas"

    def versions(self) -> list[int]:
        return sorted(int(n) for n in storage.list_names(str(self.folder)) if n.isdigit())

    def read(self, version: int) -> StructType:
        payload = json.loads((self.folder / str(version)).read_text())
        return StructType.fromJson(payload["dataSchema"])

    def latest(self) -> tuple[int, StructType] | None:
        versions = self.versions()
        return (versions[-1], self.read(versions[-1])) if versions else None

    def create(self, version: int, schema: StructType, reason: str) -> bool:
        """Write ``version`` unless someone else did first (exclusive create); True if written.

        On S3 two tasks may both write a version (see :func:`storage.create_exclusive`): the
        later one wins, and a task whose columns it lacks finds them again after the restart."""
        payload = json.dumps({"dataSchema": schema.jsonValue(), "reason": reason})
        return storage.create_exclusive(str(self.folder / str(version)), payload.encode())

    def add_columns(self, new: Sequence[StructField], reason: str) -> int:
        """Append ``new`` columns to the newest schema as a new version; returns that version.

        Several tasks may find the same new columns at once: whoever writes first wins and the
        others see their columns already there.
        """
        while True:
            current = self.latest()
            version, schema = current if current else (-1, StructType([]))
            known = {f.name for f in schema.fields}
            missing = [f for f in new if f.name not in known]
            if not missing:
                return version
            if self.create(version + 1, StructType(list(schema.fields) + missing), reason):
                return version + 1


def csv_text_header(data: bytes, opts: FileSourceOptions) -> list[str]:
    """Column names from a CSV file's first line: its header, or ``_c0, _c1, ...`` like Spark."""
    first_line = data.split(b"\n", 1)[0].decode("utf-8", "replace")
    first = next(csv.reader(io.StringIO(first_line), delimiter=opts.sep, quotechar=opts.quote), [])
    return first if opts.header else [f"_c{i}" for i in range(len(first))]
