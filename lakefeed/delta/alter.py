"""Schema changes of column-mapped tables, as metadata-only commits: turning column mapping on,
adding columns under it (``mergeSchema``), renaming and dropping columns.

Under column mapping (PROTOCOL.md, "Column Mapping") files name columns by physical name or
id, so a rename or a drop changes only the table's schema: no data file is rewritten. delta-rs
1.6.6 refuses these changes on column-mapped tables ("Column mapping is not supported for
write operation 'ADD COLUMN' yet"), so lakefeed writes the commit itself: one JSON file with
``commitInfo``, the ``protocol`` when it changes and the new ``metaData``, created at the next
version only if that version is free (Delta's put-if-absent; another writer's commit there
makes this one a conflict to retry).

    from lakefeed.delta import alter
    alter.enable_column_mapping(root, "name")
    alter.rename_column(root, "amount", "total")
    alter.drop_columns(root, ["comment"])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema

from lakefeed.core.errors import ConflictError
from lakefeed.delta import (
    constraints,
    features,
    generated,
    log,
    log_writer,
    mapping,
    post_commit,
)
from lakefeed.delta.errors import (
    COLUMN_EXISTS,
    COLUMN_MISSING,
    DEPENDENT,
    DROP_UNSUPPORTED,
    MODE_CHANGE,
    RENAME_UNSUPPORTED,
    UNSUPPORTED,
    DeltaOperationError,
)
from lakefeed.delta.schema import (
    SchemaMismatchError,
    as_nullable,
    merge_schema,
    table_arrow_schema,
)

_WORD = re.compile(r"`[^`]+`|\w+")
_ENABLE_FIX = (
    "turn column mapping on first: ALTER TABLE <table> SET TBLPROPERTIES "
    "('delta.columnMapping.mode' = 'name') (a metadata-only change; readers need Delta "
    "reader version 2)"
)


def commit_metadata(
    root: str,
    table: DeltaTable,
    operation: str,
    parameters: dict[str, Any],
    schema: dict[str, Any],
    configuration: dict[str, str] | None = None,
    partition_columns: Sequence[str] | None = None,
    protocol: dict[str, Any] | None = None,
) -> int:
    """Commit ``schema`` (Delta's JSON form) as the table's new schema, with ``configuration``
    and ``partition_columns`` when given (else the table's) and ``protocol`` when it changes;
    the version committed. ``table``: the version the change was computed from; a commit made
    since is a conflict (the change is computed from a schema)."""
    features.check_writable(table, root, operation, own_commit=True)
    meta = table.metadata()
    actions = [log_writer.commit_info(operation, parameters)]
    if protocol is not None:
        actions.append({"protocol": protocol})
    config = dict(meta.configuration) if configuration is None else configuration
    columns = meta.partition_columns if partition_columns is None else partition_columns
    schema_string = json.dumps(schema, separators=(",", ":"))
    actions.append(log_writer.metadata_action(table, schema_string, config, list(columns)))
    read = table.version()
    version = log_writer.commit_actions(root, read, actions, set(), None, rebase=False)
    post_commit.run(root, config, version, read, lambda: log.rs_table(root))
    return version


def _schema(table: DeltaTable) -> dict[str, Any]:
    return dict(json.loads(table.schema().to_json()))


def enable_column_mapping(root: str, mode: str) -> int | None:
    """``delta.columnMapping.mode`` set on an existing table: only ``none`` to ``name``, as
    delta-spark allows; the columns keep their names as physical names (the files already
    use them) and get ids; the protocol rises to reader 2 / writer 5 (or lists the feature).
    None when the table is in ``mode`` already."""
    table = log.open_table(root)
    current = log.table_mapping(table).mode
    wanted = mode.strip().lower()
    if wanted == current:
        return None
    if current != "none" or wanted != "name":
        raise DeltaOperationError(
            f"changing column mapping mode from '{current}' to '{wanted}' is not supported "
            f"on the Delta table {root}",
            fix="an existing table can go from 'none' to 'name' only; 'id' mode is set when "
            "the table is created (table_properties / TBLPROPERTIES)",
            code=MODE_CHANGE,
        )
    schema = _schema(table)
    fields, last = mapping.assign(schema["fields"], 0, lambda name: name)
    config = {**table.metadata().configuration, mapping.MODE: "name", mapping.MAX_ID: str(last)}
    return commit_metadata(
        root,
        table,
        "SET TBLPROPERTIES",
        {"properties": json.dumps({mapping.MODE: "name"})},
        {**schema, "fields": fields},
        config,
        protocol=_protocol_with_mapping(table),
    )


def _protocol_with_mapping(table: DeltaTable) -> dict[str, Any]:
    """The table's protocol with column mapping: reader 2 / writer 5 (legacy), or the feature
    named in the feature lists of a table-features protocol."""
    old = table.protocol()
    reader, writer = old.min_reader_version, old.min_writer_version
    if writer < 7:
        return {"minReaderVersion": max(reader, 2), "minWriterVersion": max(writer, 5)}
    found: dict[str, Any] = {"minReaderVersion": max(reader, 2), "minWriterVersion": writer}
    if reader >= 3:
        found["readerFeatures"] = sorted({*(old.reader_features or []), "columnMapping"})
    found["writerFeatures"] = sorted({*(old.writer_features or []), "columnMapping"})
    return found


def add_columns(root: str, table: DeltaTable, evolved: str | None, names: Sequence[str]) -> int:
    """Commit ``evolved`` (JSON: the table's schema plus the new columns ``names`` with their
    ids and physical names: a ``mergeSchema`` write's, whose files already use them) before
    the write's data commit; a conflict when the table's schema changed since it was
    computed (or column mapping was turned on)."""
    schema = _schema(table)
    count = len(schema["fields"])
    given = json.loads(evolved) if evolved is not None else {"fields": []}
    if given["fields"][:count] != schema["fields"] or [
        f["name"] for f in given["fields"][count:]
    ] != list(names):
        raise ConflictError(
            f"the schema of the Delta table {root} changed while a write added columns to it",
            fix="retry the write: its new columns are numbered again from the table of now",
        )
    config = {
        **table.metadata().configuration,
        mapping.MAX_ID: str(mapping.max_id(given["fields"])),
    }
    return commit_metadata(
        root, table, "ADD COLUMNS", {"columns": json.dumps(list(names))}, given, config
    )


def evolve(
    table: DeltaTable, new_fields: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any], mapping.ColumnMapping]:
    """The schema of a column-mapped ``table`` with ``new_fields`` (Delta's JSON form) added
    under new ids and physical names, and its column mapping: what a ``mergeSchema`` write's
    files use (:func:`add_columns` commits it)."""
    schema = _schema(table)
    last = int(table.metadata().configuration.get(mapping.MAX_ID) or 0)
    last = max(last, mapping.max_id(schema["fields"]))
    added, _ = mapping.assign(new_fields, last, lambda _: mapping.new_physical_name())
    evolved = {**schema, "fields": [*schema["fields"], *added]}
    return evolved, mapping.from_schema(evolved, table.metadata().configuration)


def for_write(
    table: DeltaTable, data: pa.Schema, merge: bool, overwrite_schema: bool, root: str
) -> dict[str, Any]:
    """What a write into ``table`` needs to know of its column mapping: the
    :class:`~lakefeed.delta.commit.WriteSpec` fields ``columns`` and ``evolved`` (new columns
    get ids and physical names now, before their files are written). ``overwriteSchema``
    that changes the schema is refused under column mapping (its columns would need new ids
    in the same commit); one that keeps it (a materialized view run again) is an overwrite."""
    columns = log.table_mapping(table)
    if not columns.active:
        return {}
    if overwrite_schema and not _same_columns(table_arrow_schema(table.schema()), data):
        raise DeltaOperationError(
            f"overwriteSchema on the column-mapped Delta table {root} is not supported by lakefeed",
            fix="rename or drop columns with ALTER TABLE … RENAME/DROP COLUMN, add them with "
            "mergeSchema, or write the new schema to a new table",
            code=UNSUPPORTED,
        )
    known = {c.name.lower() for c in columns.columns}
    new = [f for f in data if f.name.lower() not in known]
    if not new or not merge:
        return {"columns": columns}
    arrow = as_nullable(pa.schema(new))
    fields = json.loads(DeltaSchema.from_arrow(arrow).to_json())["fields"]
    evolved, columns = evolve(table, fields)
    return {"columns": columns, "evolved": json.dumps(evolved)}


def _same_columns(current: pa.Schema, data: pa.Schema) -> bool:
    try:
        merge_schema(current, data, merge=False)
    except SchemaMismatchError:
        return False
    return len(current) == len(data)


def check_columns(
    table: DeltaTable, columns: mapping.ColumnMapping | None, names: Sequence[str], root: str
) -> None:
    """Refuse to commit files written under ``columns`` (the mapping a write started from)
    when the table maps one of their columns (``names``) differently now: a column dropped
    and added again, or column mapping turned on, while they were written."""
    now = log.table_mapping(table)
    before = columns.physical_names() if columns is not None and columns.active else {}
    after = now.physical_names() if now.active else {}
    changed = [n for n in names if n in after and before.get(n, n) != after[n]]
    if changed:
        raise ConflictError(
            f"the columns {', '.join(changed)} of the Delta table {root} were remapped "
            "(column mapping) while this write's files were written",
            fix="retry the write: its files are written again under the table's columns of now",
        )


def rename_column(root: str, path: str, new_name: str) -> int:
    """``ALTER TABLE … RENAME COLUMN path TO new_name`` (``path``: dotted for a nested field)
    on a column-mapped table: the schema alone changes."""
    table = _require_mapping(root, "RENAME COLUMN", RENAME_UNSUPPORTED)
    schema = _schema(table)
    *parents, leaf = path.split(".")
    siblings = _fields_at(schema, parents, root)
    field = _field(siblings, leaf, path, root)
    if any(f["name"].lower() == new_name.lower() for f in siblings if f is not field):
        raise DeltaOperationError(
            f"cannot rename {path} to {new_name}: a column {new_name!r} exists already in "
            f"the Delta table {root}",
            fix="choose a name no other column at that level has",
            code=COLUMN_EXISTS,
        )
    _refuse_dependents(table, field["name"] if not parents else parents[0], "rename", root)
    old = field["name"]
    field["name"] = new_name
    partitions = list(table.metadata().partition_columns)
    if not parents:
        partitions = [new_name if c == old else c for c in partitions]
    return commit_metadata(
        root,
        table,
        "RENAME COLUMN",
        {"oldColumnPath": path, "newColumnPath": ".".join([*parents, new_name])},
        schema,
        partition_columns=partitions,
    )


def drop_columns(root: str, paths: Sequence[str], if_exists: bool = False) -> int | None:
    """``ALTER TABLE … DROP COLUMN[S]`` on a column-mapped table: the schema alone changes
    (the files keep the data until they are rewritten); None when nothing was to drop."""
    table = _require_mapping(root, "DROP COLUMN", DROP_UNSUPPORTED)
    schema = _schema(table)
    partitions = {c.lower() for c in table.metadata().partition_columns}
    dropped = []
    for path in paths:
        *parents, leaf = path.split(".")
        siblings = _fields_at(schema, parents, root)
        found = [f for f in siblings if f["name"].lower() == leaf.lower()]
        if not found and if_exists:
            continue
        field = _field(siblings, leaf, path, root)
        if not parents and field["name"].lower() in partitions:
            _refuse(f"dropping the partition column {path!r}", root, DROP_UNSUPPORTED)
        _refuse_dependents(table, field["name"] if not parents else parents[0], "drop", root)
        siblings.remove(field)
        dropped.append(path)
        if not siblings:
            _refuse(f"dropping {path!r}, the last field of its struct", root, DROP_UNSUPPORTED)
    if not dropped:
        return None
    return commit_metadata(root, table, "DROP COLUMNS", {"columns": json.dumps(dropped)}, schema)


def _require_mapping(root: str, operation: str, code: str) -> DeltaTable:
    table = log.open_table(root)
    if not log.table_mapping(table).active:
        raise DeltaOperationError(
            f"{operation} is not supported for the Delta table {root}: it needs column "
            "mapping (without it the data files name columns by their names, so a rename or "
            "drop would rewrite every file)",
            fix=_ENABLE_FIX,
            code=code,
        )
    return table


def _fields_at(schema: dict[str, Any], parents: Sequence[str], root: str) -> list[dict[str, Any]]:
    """The field list of the struct at ``parents`` (empty: the top level)."""
    fields: list[dict[str, Any]] = schema["fields"]
    for depth, name in enumerate(parents):
        field = _field(fields, name, ".".join(parents[: depth + 1]), root)
        if not isinstance(field["type"], dict) or field["type"].get("type") != "struct":
            _refuse(f"{'.'.join(parents[: depth + 1])} is not a struct", root, COLUMN_MISSING)
        fields = field["type"]["fields"]
    return fields


def _field(fields: list[dict[str, Any]], name: str, path: str, root: str) -> dict[str, Any]:
    found = next((f for f in fields if f["name"].lower() == name.lower()), None)
    if found is None:
        names = ", ".join(f["name"] for f in fields)
        raise DeltaOperationError(
            f"column {path!r} is not in the Delta table {root} (columns there: {names})",
            fix="name an existing column (DESCRIBE TABLE lists them)",
            code=COLUMN_MISSING,
        )
    return found


def _refuse_dependents(table: DeltaTable, column: str, what: str, root: str) -> None:
    """delta-spark refuses to rename or drop a column a CHECK constraint or a generated
    column's expression uses: the expression would name a column that is gone."""
    expressions = [e for _, e in constraints.of_table(table.metadata().configuration, None)]
    expressions += [e for _, e in generated.expressions(table.schema())]
    uses = _mentions(column)
    used = [e for e in expressions if uses(e)]
    if used:
        raise DeltaOperationError(
            f"cannot {what} column {column!r} of the Delta table {root}: it is used by "
            f"{'; '.join(used)}",
            fix="drop the CHECK constraint (or generated column) that uses it first",
            code=DEPENDENT,
        )


def _mentions(column: str) -> Callable[[str], bool]:
    """Whether an expression names ``column`` (a word, or a back-quoted name)."""
    lowered = column.lower()
    return lambda text: any(word.strip("`").lower() == lowered for word in _WORD.findall(text))


def _refuse(what: str, root: str, code: str) -> NoReturn:
    raise DeltaOperationError(
        f"{what} is not supported on the Delta table {root}",
        fix="leave it, or rewrite the table without it (overwrite with overwriteSchema=true)",
        code=code,
    )
