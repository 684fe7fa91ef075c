"""One micro-batch into PostgreSQL, once: staging COPY, upsert, batch record, one transaction.

Spark-free: it takes the batch as an Arrow table, so it is tested against a real server without
a JVM, and the Spark adapter only collects the batch and calls it.

The commit table records, with a query's last batch id, the hash of that batch's source offsets
(``offsets/N`` of its checkpoint): a replay after a crash has the same and is skipped; a batch
id the table holds over other offsets, or an older one, comes from a checkpoint behind the table
(restored from a backup, or its last ``offsets/N`` + ``commits/N`` deleted) and is refused before
anything is written (``CHECKPOINT_BEHIND_TABLE``). A row of an older version (no hash) is judged
by the batch id alone, as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from lakefeed.connectors.postgres.errors import BAD_TARGET, DUPLICATE_KEYS, UNAVAILABLE
from lakefeed.core.errors import ConfigError, DataLossRiskError, UnavailableError
from lakefeed.core.redact import redact_text
from lakefeed.delta.errors import CHECKPOINT_BEHIND
from lakefeed.spark import offset_log

if TYPE_CHECKING:
    import psycopg

COMMITS_TABLE = "lakefeed_sink_commits"
"""Per query (``app_id``): the last batch applied and its source offsets hash. Created next to
the target when missing (and given the hash column when an older version created it)."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class PostgresTarget:
    """Where batches go. ``keys`` empty: rows are appended; otherwise upserted on ``keys``,
    which a primary key or unique index of the table must cover exactly (``ON CONFLICT``)."""

    url: str = field(repr=False)  # libpq URI or key=value string; holds the password
    table: str  # "name" or "schema.name"
    keys: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        check_name(self.table, "table", parts=2)
        for key in self.keys:
            check_name(key, "key column")

    @property
    def where(self) -> str:
        """The target for messages: the URL without its password."""
        return f"{redact_text(self.url)} table {self.table}"

    def __repr__(self) -> str:
        return f"PostgresTarget({self.where!r}, keys={list(self.keys)})"


def check_name(name: str, what: str, parts: int = 1) -> str:
    """A plain identifier (``parts=2``: or ``schema.name``): SQL is built from these names."""
    split = name.split(".")
    if len(split) > parts or not all(_IDENTIFIER.match(p) for p in split):
        raise ConfigError(
            f"PostgreSQL {what} {name!r} is not a plain name"
            + (" or schema.name" if parts > 1 else ""),
            fix="use letters, digits and underscores, e.g. public.customers",
            code=BAD_TARGET,
        )
    return name


def connect(url: str) -> psycopg.Connection:
    try:
        import psycopg  # the optional extra lakefeed[postgres]: say so if missing
    except ImportError:
        raise ConfigError(
            "the PostgreSQL connector needs psycopg 3, which is not installed",
            fix="pip install 'lakefeed[postgres]'",
            code=BAD_TARGET,
        ) from None

    try:
        return psycopg.connect(url, connect_timeout=10)
    except psycopg.OperationalError as error:
        raise UnavailableError(
            f"PostgreSQL at {redact_text(url)} does not answer: {redact_text(str(error)).strip()}",
            fix="check the host, port, database, user and password of the connection URL",
            code=UNAVAILABLE,
        ) from None


def check_target(target: PostgresTarget, columns: Sequence[str]) -> None:
    """Refuse, before a query starts, a target the batches could not be written to."""
    with connect(target.url) as conn:
        table_columns = _columns(conn, target)
        missing = [c for c in columns if c not in table_columns]
        if missing:
            raise ConfigError(
                f"{target.where} has no column(s) {missing} (it has {sorted(table_columns)})",
                fix="add the columns to the table, or select only the table's columns",
                code=BAD_TARGET,
            )
        if target.keys and set(target.keys) not in _unique_keys(conn, target):
            raise ConfigError(
                f"{target.where}: upserts on {list(target.keys)} need a primary key or unique "
                "index on exactly those columns (INSERT … ON CONFLICT)",
                fix=f"ALTER TABLE {target.table} ADD PRIMARY KEY ({', '.join(target.keys)})",
                code=BAD_TARGET,
            )
        _create_commits_table(conn, target)


def last_batch(target: PostgresTarget, app_id: str) -> int | None:
    """The last batch recorded for query ``app_id``."""
    with connect(target.url) as conn:
        _create_commits_table(conn, target)
        row = conn.execute(
            _sql("SELECT batch_id FROM {} WHERE app_id = %s", _commits(target)), [app_id]
        ).fetchone()
    return None if row is None else int(row[0])


def write_batch(
    target: PostgresTarget,
    app_id: str,
    batch_id: int,
    rows: pa.Table,
    offsets: str | None = None,
) -> int | None:
    """Apply batch ``batch_id`` of query ``app_id`` once: the rows it wrote, or None when the
    batch was applied before (a replay after a crash: nothing changes). ``offsets``: the
    batch's source offsets hash (:func:`offset_log.fingerprint`), recorded with the batch id and
    compared at a replay."""
    with connect(target.url) as conn, conn.transaction():
        _create_commits_table(conn, target)
        done = conn.execute(
            _sql(
                "SELECT batch_id, source_offsets FROM {} WHERE app_id = %s FOR UPDATE",
                _commits(target),
            ),
            [app_id],
        ).fetchone()
        if done is not None and int(done[0]) >= batch_id:
            _refuse_if_behind(target, batch_id, offsets, int(done[0]), done[1])
            return None
        _stage(conn, target, rows)
        written = _apply(conn, target, rows.column_names)
        conn.execute(
            _sql(
                "INSERT INTO {} (app_id, batch_id, source_offsets, committed_at) "
                "VALUES (%s, %s, %s, now()) ON CONFLICT (app_id) DO UPDATE SET "
                "batch_id = EXCLUDED.batch_id, source_offsets = EXCLUDED.source_offsets, "
                "committed_at = EXCLUDED.committed_at",
                _commits(target),
            ),
            [app_id, batch_id, offsets],
        )
    return written


def _refuse_if_behind(
    target: PostgresTarget, batch_id: int, offsets: str | None, held: int, recorded: str | None
) -> None:
    """Refuse skipping a batch the commit table holds under other source offsets (or an older
    one): the checkpoint is behind the table, and the batch's rows would never arrive."""
    what = offset_log.replay_conflict(batch_id, offsets, held, lambda: recorded)
    if what is None:
        return
    raise DataLossRiskError(
        f"the checkpoint is behind its PostgreSQL sink: it runs batch {batch_id}, but "
        f"{_commits(target)} of {target.where} {what}; the batch would be skipped as already "
        "written and its rows would never arrive (a checkpoint restored from an older backup, "
        "or its last offsets/commits files deleted). Nothing was written",
        fix="restore the checkpoint and the table together from the same backup (or put back "
        "the checkpoint that goes with the table as it is now); or start the sink over: a new, "
        "empty checkpoint (for a pipeline sink `lakefeed run PIPELINE --full-refresh <sink>`) "
        "upserts every row again, an append-only target (no keys) should be emptied first",
        code=CHECKPOINT_BEHIND,
    )


def _stage(conn: psycopg.Connection, target: PostgresTarget, rows: pa.Table) -> None:
    from psycopg import sql  # the optional extra lakefeed[postgres]

    conn.execute(
        _sql(
            "CREATE TEMP TABLE lakefeed_stage (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP",
            target.table,
        )
    )
    columns = sql.SQL(", ").join(map(sql.Identifier, rows.column_names))
    copy_sql = sql.SQL("COPY lakefeed_stage ({}) FROM STDIN").format(columns)
    with conn.cursor().copy(copy_sql) as copy:
        for batch in rows.to_batches():
            for row in batch.to_pylist():
                copy.write_row(list(row.values()))


def _apply(conn: psycopg.Connection, target: PostgresTarget, columns: list[str]) -> int:
    from psycopg import sql  # the optional extra lakefeed[postgres]

    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    insert = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM lakefeed_stage").format(
        _name(target.table), names, names
    )
    if not target.keys:
        return conn.execute(insert).rowcount
    _refuse_duplicate_keys(conn, target)
    keys = sql.SQL(", ").join(map(sql.Identifier, target.keys))
    updates = [c for c in columns if c not in target.keys]
    action = (
        sql.SQL("DO UPDATE SET {}").format(
            sql.SQL(", ").join(
                sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                for c in updates
            )
        )
        if updates
        else sql.SQL("DO NOTHING")
    )
    upsert = sql.SQL("{} ON CONFLICT ({}) {}").format(insert, keys, action)
    return conn.execute(upsert).rowcount


def _refuse_duplicate_keys(conn: psycopg.Connection, target: PostgresTarget) -> None:
    """Two rows of one batch for the same key: which one wins is not defined (Delta's MERGE
    refuses the same), and PostgreSQL cannot update a row twice in one statement."""
    from psycopg import sql  # the optional extra lakefeed[postgres]

    keys = sql.SQL(", ").join(map(sql.Identifier, target.keys))
    found = conn.execute(
        sql.SQL("SELECT {} FROM lakefeed_stage GROUP BY {} HAVING count(*) > 1 LIMIT 1").format(
            keys, keys
        )
    ).fetchone()
    if found is not None:
        key = dict(zip(target.keys, found, strict=True))
        raise ConfigError(
            f"{target.where}: the batch has several rows for key {key}",
            fix="keep one row per key before the sink (e.g. the newest, with a window or "
            "dropDuplicates)",
            code=DUPLICATE_KEYS,
        )


def _columns(conn: psycopg.Connection, target: PostgresTarget) -> set[str]:
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
        "AND attnum > 0 AND NOT attisdropped",
        [target.table],
    ).fetchall()
    if not rows:
        raise ConfigError(
            f"{target.where} does not exist",
            fix=f"create it first, e.g. CREATE TABLE {target.table} (...)"
            + (f" with PRIMARY KEY ({', '.join(target.keys)})" if target.keys else ""),
            code=BAD_TARGET,
        )
    return {str(r[0]) for r in rows}


def _unique_keys(conn: psycopg.Connection, target: PostgresTarget) -> list[set[str]]:
    rows = conn.execute(
        "SELECT array_agg(a.attname::text) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique GROUP BY i.indexrelid",
        [target.table],
    ).fetchall()
    return [set(r[0]) for r in rows]


def _create_commits_table(conn: psycopg.Connection, target: PostgresTarget) -> None:
    commits = _commits(target)
    conn.execute(
        _sql(
            "CREATE TABLE IF NOT EXISTS {} (app_id text PRIMARY KEY, batch_id bigint NOT NULL, "
            "source_offsets text, committed_at timestamptz NOT NULL)",
            commits,
        )
    )
    # A table of an older version lacks the hash column. Looked up first: ALTER TABLE would
    # lock the table, shared by every query writing this schema, for the whole batch.
    has_offsets = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
        "AND attname = 'source_offsets' AND NOT attisdropped",
        [commits],
    ).fetchone()
    if has_offsets is None:
        conn.execute(_sql("ALTER TABLE {} ADD COLUMN IF NOT EXISTS source_offsets text", commits))


def _commits(target: PostgresTarget) -> str:
    schema = target.table.rpartition(".")[0]
    return f"{schema}.{COMMITS_TABLE}" if schema else COMMITS_TABLE


def _name(table: str):  # noqa: ANN202 - psycopg.sql.Composable, imported lazily
    from psycopg import sql  # the optional extra lakefeed[postgres]

    return sql.Identifier(*table.split("."))


def _sql(template: str, table: str):  # noqa: ANN202 - psycopg.sql.Composed
    from psycopg import sql  # the optional extra lakefeed[postgres]

    return sql.SQL(template).format(_name(table))
