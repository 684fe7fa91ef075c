"""Read one landed file into an Arrow batch of exactly the stream's schema, losing nothing.

Runs on executors, Spark-free. Values that do not fit the schema (wrong type, a field whose name
differs only in case, a malformed JSON line, a CSV row with the wrong number of fields, and in
``rescue`` mode new columns) go to the rescued-data column as JSON with the file path, like Auto
Loader's ``_rescued_data``. Without a rescued-data column such a value fails the batch with a
message that says how to keep it: never a silent null.

JSON takes pyarrow's fast reader when a file fits the schema; otherwise that file alone is
decoded line by line so only the lines that fail cost Python time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
from pyspark.sql.types import (
    ArrayType,
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

from lakefeed.connectors.files.errors import (
    BadRecordsError,
    NewColumnsError,
    SchemaEvolvedError,
    UnreadableFileError,
)
from lakefeed.connectors.files.filelog import FileEntry, skipped_dir, write_json
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.pushdown import Predicate
from lakefeed.connectors.files.schemas import (
    METADATA_COLUMN,
    SchemaStore,
    arrow_field,
    csv_text_header,
    merge_types,
    settle,
    value_type,
)
from lakefeed.core import storage
from lakefeed.core.logs import get_logger

CORRUPT_RECORD = "_corrupt_record"
FILE_PATH_KEY = "_file_path"
MAX_BATCH_ROWS = 65_536

log = get_logger("lakefeed.connectors.files")


@dataclass
class Decoded:
    """A file decoded against the plan: typed columns, per-row rescued values, new columns."""

    num_rows: int
    columns: dict[str, pa.Array] = field(default_factory=dict)
    rescued: list[dict[str, Any] | None] = field(default_factory=list)
    new_fields: dict[str, DataType] = field(default_factory=dict)

    def note_new(self, name: str, dtype: DataType) -> None:
        self.new_fields[name] = merge_types(self.new_fields.get(name, NullType()), dtype)


# ------------------------------------------------------------------------------------ values


class Mismatch(ValueError):
    """A value does not fit a type."""


def _timestamp(value: str, ntz: bool) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if ntz:
        return parsed.replace(tzinfo=None)
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


_INT_RANGE: dict[type[DataType], int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def coerce(value: Any, dtype: DataType) -> Any:
    """A parsed JSON value as ``dtype`` (Spark's JSON rules), or :class:`Mismatch`."""
    if value is None:
        return None
    try:
        return _coerce(value, dtype)
    except (TypeError, ValueError, InvalidOperation, OverflowError) as exc:
        raise Mismatch(str(exc)) from None


def _coerce(value: Any, dtype: DataType) -> Any:  # noqa: C901 - one branch per Spark type
    if isinstance(dtype, StringType):
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if type(dtype) in _INT_RANGE:
        bits = _INT_RANGE[type(dtype)]
        if isinstance(value, bool) or not isinstance(value, int):
            raise Mismatch(f"not an integer: {value!r}")
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise Mismatch(f"out of range: {value}")
        return value
    if isinstance(dtype, DoubleType | FloatType):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Mismatch(f"not a number: {value!r}")
        return float(value)
    if isinstance(dtype, BooleanType):
        if not isinstance(value, bool):
            raise Mismatch(f"not a boolean: {value!r}")
        return value
    if isinstance(dtype, DecimalType):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise Mismatch(f"not a decimal: {value!r}")
        number = Decimal(str(value)).quantize(Decimal(1).scaleb(-dtype.scale))
        if len(number.as_tuple().digits) > dtype.precision:
            raise Mismatch(f"does not fit {dtype.simpleString()}: {value!r}")
        return number
    if isinstance(dtype, DateType):
        return dt.date.fromisoformat(_text(value))
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return _timestamp(_text(value), isinstance(dtype, TimestampNTZType))
    if isinstance(dtype, ArrayType):
        if not isinstance(value, list):
            raise Mismatch(f"not an array: {value!r}")
        return [coerce(item, dtype.elementType) for item in value]
    if isinstance(dtype, MapType):
        if not isinstance(value, dict):
            raise Mismatch(f"not an object: {value!r}")
        return [(k, coerce(v, dtype.valueType)) for k, v in value.items()]
    if isinstance(dtype, StructType):
        if not isinstance(value, dict):
            raise Mismatch(f"not an object: {value!r}")
        names = set(dtype.names)
        extra = [k for k in value if k not in names]
        if extra:
            raise Mismatch(f"unknown nested fields {extra}")
        return {f.name: coerce(value.get(f.name), f.dataType) for f in dtype.fields}
    raise Mismatch(f"cannot read JSON into {dtype.simpleString()}")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Mismatch(f"not a string: {value!r}")
    return value


def _cast_one(value: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """Cast one value; naive timestamp text is read as UTC like Spark's session time zone."""
    single = pa.array([value], source)
    try:
        return pc.cast(single, target)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if pa.types.is_timestamp(target) and pa.types.is_string(source):
            return pc.cast(pc.cast(single, pa.timestamp(target.unit)), target)[0].as_py()
        raise


def cast_with_rescue(array: pa.Array, target: pa.DataType) -> tuple[pa.Array, list[int]]:
    """``array`` as ``target``; indexes of values that do not convert come back as nulls."""
    if array.type == target:
        return array, []
    try:
        return pc.cast(array, target, safe=True), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values, bad = [], []
    for index, value in enumerate(array.to_pylist()):
        try:
            values.append(None if value is None else _cast_one(value, array.type, target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            values.append(None)
            bad.append(index)
    return pa.array(values, target), bad


# ---------------------------------------------------------------------------------- formats


def _decode_json(data: bytes, plan: ReadPlan) -> Decoded:
    if not plan.opts.multi_line:
        fast = _json_fast(data, plan)
        if fast is not None:
            return fast
    records: list[tuple[Any, bytes]] = []
    if plan.opts.multi_line:
        try:
            doc = json.loads(data)
            docs = doc if isinstance(doc, list) else [doc]
            records = [(d, b"") for d in docs]
        except ValueError:
            records = [(None, data)]
    else:
        for raw in data.splitlines():
            if raw.strip():
                try:
                    records.append((json.loads(raw), raw))
                except ValueError:
                    records.append((None, raw))
    return _decode_records(records, plan)


def _json_fast(data: bytes, plan: ReadPlan) -> Decoded | None:
    """pyarrow's reader, when the whole file fits the schema exactly; else None. Fields the
    flow does not read are skipped unparsed (:attr:`ReadPlan.parse_all`)."""
    names = plan.parsed
    wanted = pa.schema([plan.arrow_schema.field(name) for name in names])
    skip_others = not plan.parse_all
    if skip_others and _case_variants(data, names):
        return None  # pyarrow would drop a variant in case silently: the slow path rescues it
    try:
        table = pajson.read_json(
            io.BytesIO(data),
            parse_options=pajson.ParseOptions(
                explicit_schema=wanted,
                unexpected_field_behavior="ignore" if skip_others else "error",
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if not all(table.schema.field(n).type == wanted.field(n).type for n in names):
        return None
    decoded = Decoded(table.num_rows, rescued=[None] * table.num_rows)
    decoded.columns = {name: table.column(name).combine_chunks() for name in names}
    return decoded


def _case_variants(data: bytes, names: tuple[str, ...]) -> bool:
    """Whether ``data`` may hold a key that differs from one of ``names`` only in case (a
    cheap over-approximation: the same text in a value counts too)."""
    lowered = data.lower()
    if lowered == data:
        return False  # no capital letter at all: one pass, where counting costs one per name
    for name in names:
        quoted = json.dumps(name).encode()
        if lowered.count(quoted.lower()) != data.count(quoted):
            return True
    return False


def _decode_records(records: list[tuple[Any, bytes]], plan: ReadPlan) -> Decoded:
    decoded = Decoded(len(records))
    rows: list[dict[str, Any]] = []
    for record, raw in records:
        row: dict[str, Any] = {}
        bad: dict[str, Any] = {}
        if isinstance(record, dict):
            for key, value in record.items():
                _place(key, value, plan, row, bad, decoded)
        else:
            bad[CORRUPT_RECORD] = raw.decode("utf-8", "replace") if raw else json.dumps(record)
        rows.append(row)
        decoded.rescued.append(bad or None)
    for name in plan.parsed:
        decoded.columns[name] = pa.array([r.get(name) for r in rows], plan.arrow_type(name))
    return decoded


def _place(
    key: str, value: Any, plan: ReadPlan, row: dict[str, Any], bad: dict[str, Any], out: Decoded
) -> None:
    if not plan.parses(key):
        return
    target = plan.fields.get(key)
    if target is None:
        if key.lower() in plan.lower_names:
            bad[key] = value  # differs only in case: Spark would confuse the two columns
            return
        out.note_new(key, value_type(value))
        if plan.rescue_unknown:
            bad[key] = value
        return
    try:
        row[key] = coerce(value, target.dataType)
    except Mismatch:
        bad[key] = value


def _decode_csv(data: bytes, plan: ReadPlan) -> Decoded:
    opts = plan.opts
    names = csv_text_header(data, opts)
    broken: list[str] = []

    def keep_broken(row: Any) -> str:
        broken.append(row.text)
        return "skip"

    table = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=1 if opts.header else 0),
        parse_options=pacsv.ParseOptions(
            delimiter=opts.sep,
            quote_char=opts.quote,
            escape_char=opts.escape or False,
            invalid_row_handler=keep_broken,
        ),
        convert_options=pacsv.ConvertOptions(
            include_columns=[n for n in names if plan.parses(n)] or None,
            column_types={n: pa.string() for n in names},
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    decoded = _decode_table(table, plan)
    for text in broken:
        decoded.rescued.append({CORRUPT_RECORD: text})
    if broken:
        decoded.num_rows += len(broken)
        decoded.columns = {
            n: pa.concat_arrays([a, pa.nulls(len(broken), a.type)])
            for n, a in decoded.columns.items()
        }
    return decoded


def _new_column_type(column: pa.Array, plan: ReadPlan) -> DataType:
    """Type of a column the schema lacks: as stored (Parquet), inferred or string (CSV)."""
    if plan.opts.format == "parquet":
        return arrow_field(pa.field("new", column.type)).dataType
    if not plan.opts.infer_column_types:
        return StringType()
    for candidate, spark_type in ((pa.int64(), LongType()), (pa.float64(), DoubleType())):
        try:
            pc.cast(column, candidate)
            return spark_type
        except pa.ArrowInvalid:
            continue
    return StringType()


def _decode_parquet(path: str, plan: ReadPlan) -> Decoded:
    fs, inner = storage.filesystem(path)
    if plan.parse_all:
        return _decode_table(pq.read_table(inner, filesystem=fs), plan)
    file = pq.ParquetFile(inner, filesystem=fs)
    columns = [n for n in file.schema_arrow.names if plan.parses(n)]
    table = file.read(columns=columns)
    if not columns:  # no column read, but the rows are still the flow's
        table = pa.table({"_": pa.nulls(file.metadata.num_rows)}).drop_columns(["_"])
    return _decode_table(table, plan)


def _decode_table(table: pa.Table, plan: ReadPlan) -> Decoded:
    """Columns of a CSV or Parquet table matched by name and cast; misfits rescued per row."""
    decoded = Decoded(table.num_rows, rescued=[None] * table.num_rows)
    for name in table.column_names:
        if not plan.parses(name):
            continue
        column = table.column(name).combine_chunks()
        if name in plan.fields:
            array, bad = cast_with_rescue(column, plan.arrow_type(name))
            decoded.columns[name] = array
        elif name.lower() in plan.lower_names:
            bad = list(range(len(column)))
        else:
            decoded.note_new(name, _new_column_type(column, plan))
            if not plan.rescue_unknown:
                continue
            bad = [i for i in range(len(column)) if column[i].is_valid]
        if bad:
            values = column.take(pa.array(bad)).to_pylist()
            for index, value in zip(bad, values, strict=True):
                decoded.rescued[index] = {**(decoded.rescued[index] or {}), name: value}
    return decoded


# ----------------------------------------------------------------------------------- a file


def _metadata(entry: FileEntry, rows: int, struct_type: pa.StructType) -> pa.Array:
    mtime = pa.scalar(entry.mtime_ms * 1000, pa.timestamp("us", tz="UTC"))
    arrays = [
        pa.repeat(pa.scalar(entry.path), rows),
        pa.repeat(pa.scalar(os.path.basename(entry.path)), rows),
        pa.repeat(pa.scalar(entry.size, pa.int64()), rows),
        pa.repeat(mtime, rows),
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type))


def decode_file(entry: FileEntry, plan: ReadPlan) -> Decoded:
    """Decode ``entry`` or raise :class:`UnreadableFileError` (the caller skips or fails)."""
    try:
        if plan.opts.format == "parquet":
            return _decode_parquet(entry.path, plan)
        data = storage.read_bytes(entry.path)  # local or s3://: this task's own client
        if plan.opts.format == "json":
            return _decode_json(data, plan)
        return _decode_csv(data, plan)
    except FileNotFoundError as exc:
        raise UnreadableFileError(f"file vanished before it was read: {entry.path}") from exc
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        raise UnreadableFileError(f"cannot read {entry.path}: {exc}") from exc


def _settle_new_columns(entry: FileEntry, decoded: Decoded, plan: ReadPlan) -> None:
    """Apply the evolution mode to columns the file has and the schema has not."""
    if not decoded.new_fields or plan.evolution_mode in ("rescue", "none"):
        return
    names = sorted(decoded.new_fields)
    if plan.evolution_mode == "failOnNewColumns":
        raise NewColumnsError(
            f"[UNKNOWN_FIELD_EXCEPTION.NEW_FIELDS_IN_FILE] file {entry.path} has new columns "
            f"{names} and cloudFiles.schemaEvolutionMode is failOnNewColumns: add them to the "
            "schema (or schemaHints), or use addNewColumns / rescue"
        )
    fields = [StructField(n, settle(decoded.new_fields[n])) for n in names]
    version = SchemaStore(plan.schema_location).add_columns(fields, f"new columns in {entry.path}")
    raise SchemaEvolvedError(
        f"[UNKNOWN_FIELD_EXCEPTION.NEW_FIELDS_IN_FILE] file {entry.path} has new columns "
        f"{names}. The schema at {plan.schema_location} is now version {version} with them; "
        "restart the stream to ingest them (the stopped batch is replayed with the new schema)."
    )


def _rescued_json(bad: dict[str, Any] | None, path: str) -> str | None:
    if not bad:
        return None
    return json.dumps({**bad, FILE_PATH_KEY: path}, default=str, separators=(",", ":"))


def to_batches(entry: FileEntry, decoded: Decoded, plan: ReadPlan) -> Iterator[pa.RecordBatch]:
    """Assemble the output batch(es) of one decoded file."""
    _settle_new_columns(entry, decoded, plan)
    rows = decoded.num_rows
    if rows == 0:
        return
    if plan.rescue_column is None:
        bad = [r for r in decoded.rescued if r]
        if bad:
            raise BadRecordsError(
                f"{len(bad)} record(s) of {entry.path} do not fit the schema, e.g. "
                f"{json.dumps(bad[0], default=str)[:300]}; set option rescuedDataColumn "
                "(and add that STRING column to a user-given schema) to keep them"
            )
    arrays: list[pa.Array] = []
    for f in plan.kept.fields:
        if f.name in plan.fields:
            arrays.append(decoded.columns.get(f.name, pa.nulls(rows, plan.arrow_type(f.name))))
        elif f.name == plan.rescue_column:
            texts = [_rescued_json(r, entry.path) for r in decoded.rescued]
            arrays.append(pa.array(texts, pa.string()))
        elif f.name == METADATA_COLUMN:
            arrays.append(_metadata(entry, rows, plan.arrow_type(METADATA_COLUMN)))
    batch = _kept_rows(pa.RecordBatch.from_arrays(arrays, schema=plan.kept_arrow), plan)
    for offset in range(0, batch.num_rows, MAX_BATCH_ROWS):
        yield batch.slice(offset, MAX_BATCH_ROWS)


def _kept_rows(batch: pa.RecordBatch, plan: ReadPlan) -> pa.RecordBatch:
    """The rows of ``batch`` that pass the flow's pushed filters (all without any)."""
    mask = None
    for predicate in plan.pushdown.filters:
        test = predicate_mask(batch.column(predicate.column), predicate)
        mask = test if mask is None else pc.and_kleene(mask, test)
    return batch if mask is None else batch.filter(mask)  # a null test drops, as in Spark


def predicate_mask(column: pa.Array, predicate: Predicate) -> pa.Array:
    """Where ``column`` satisfies ``predicate`` (null where Spark's comparison is null)."""
    op, value = predicate.op, predicate.value
    if op == "null":
        return pc.is_null(column)
    if op == "notnull":
        return pc.is_valid(column)
    if op == "in":
        # null for a null value, as Spark's IN; false for a miss (both drop the row)
        return pc.if_else(pc.is_valid(column), pc.is_in(column, pa.array(value, column.type)), None)
    if op == "startswith":
        return pc.starts_with(column, value)
    return _COMPARE[op](column, pa.scalar(value, column.type))


_COMPARE = {
    "eq": pc.equal,
    "lt": pc.less,
    "le": pc.less_equal,
    "gt": pc.greater,
    "ge": pc.greater_equal,
}


def read_entry(entry: FileEntry, plan: ReadPlan) -> Iterator[pa.RecordBatch]:
    """All rows of one file; an unreadable file is skipped and recorded, or fails the batch."""
    try:
        decoded = decode_file(entry, plan)
    except UnreadableFileError as exc:
        vanished = isinstance(exc.__cause__, FileNotFoundError)
        allowed = plan.opts.ignore_missing_files if vanished else plan.opts.ignore_corrupt_files
        if not allowed:
            option = "ignoreMissingFiles" if vanished else "ignoreCorruptFiles"
            raise UnreadableFileError(
                f"{exc}. Fix or remove the file, or set option {option}=true to skip such files "
                f"(they are then recorded under {skipped_dir(plan.schema_location)})"
            ) from exc
        record_skipped(entry, str(exc), plan.schema_location)
        return
    yield from to_batches(entry, decoded, plan)


def record_skipped(entry: FileEntry, error: str, schema_location: str) -> None:
    """Leave a durable record of a skipped file (read by the source's commit and by tools)."""
    folder = skipped_dir(schema_location)
    folder.mkdir(parents=True, exist_ok=True)
    # Named by the path's digest: a retried task rewrites the same record.
    name = hashlib.sha1(entry.path.encode()).hexdigest()[:16] + ".json"
    write_json(
        folder / name,
        {"path": entry.path, "size": entry.size, "mtime_ms": entry.mtime_ms, "error": error},
    )
    log.warning("skipped unreadable file", extra={"file": entry.path, "error": error})
