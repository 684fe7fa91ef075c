"""Delta SQL text → small typed statements, without Spark.

Which tables a statement reads, with their time travel, and the target of its DML come from
sqlglot's parser (:mod:`lakefeed.sql.references`; the package doc says why sqlglot and where
Spark's own parser decides). What neither Spark nor sqlglot knows is read here by a small hand
grammar over lakefeed's one tokenizer (:mod:`lakefeed.sql.tokens`): Delta's utility statements
(``DESCRIBE HISTORY/DETAIL``, ``VACUUM``, ``OPTIMIZE``, ``RESTORE``, ``GENERATE``, ``CONVERT``,
as in ``DeltaSqlBase.g4``), and the clauses of CREATE/INSERT/UPDATE/DELETE/MERGE lakefeed hands
to the Delta engine. Expressions (conditions, values, queries) are never rewritten: they are
kept as the user's text, cut at the keywords that end them outside quotes and parentheses.

:func:`parse` gives one statement object; every table reference a query reads (``delta.`p```, with
``VERSION AS OF`` / ``TIMESTAMP AS OF`` / ``@v<n>``; names; ``table_changes(...)``) is listed in its
``reads`` with its span in the text, so the adapter (:mod:`lakefeed.compat.delta_spark.sql.run`) can
put a temporary view of lakefeed's Delta read in its place. Nothing here decides whether a plain
name is a Delta table: that needs the session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from lakefeed.compat.delta_spark.errors import NOT_PARQUET, DeltaSqlError
from lakefeed.sql.ddl import COLUMN_LIST, Column, column
from lakefeed.sql.grammar import Cursor
from lakefeed.sql.references import (
    CLAUSE_END,
    References,
    TableRef,
    name_at,
    references,
    time_travel,
)
from lakefeed.sql.references import split_time_travel as split_time_travel  # its old home
from lakefeed.sql.tokens import Token, tokens

# -- path identifiers ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"^\s*(delta|parquet)\s*\.\s*`((?:[^`]|``)+)`\s*$", re.IGNORECASE)


def path_identifier(identifier: str, kind: str = "delta") -> str | None:
    """The path of Delta's ``delta.`/path``` (or ``parquet.`/path```) identifier, else None."""
    match = _IDENTIFIER.match(identifier)
    if match is None or match.group(1).lower() != kind:
        return None
    return match.group(2).replace("``", "`")


# -- statements ---------------------------------------------------------------------------------


@dataclass
class Statement:
    """Base: the whole text and the tables its queries read."""

    reads: list[TableRef] = field(default_factory=list, kw_only=True)


@dataclass
class Query(Statement):
    """Anything else: Spark runs it once its reads are rewritten. ``readable`` is False when
    the parser could not read it (its reads are unknown: Spark's parser decides)."""

    readable: bool = True


@dataclass
class CreateTable(Statement):
    target: TableRef
    mode: Literal["create", "createIfNotExists", "replace", "createOrReplace"]
    using: str | None = None
    columns: list[Column] = field(default_factory=list)
    partitioned_by: list[str] = field(default_factory=list)
    clustered_by: list[str] | None = None
    location: str | None = None
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    query: tuple[int, int] | None = None  # span of AS <query>
    clone: bool = False


@dataclass
class Insert(Statement):
    target: TableRef
    overwrite: bool
    columns: list[str] | None
    query: tuple[int, int]
    unsupported: str | None = None  # PARTITION (...), REPLACE WHERE, BY NAME...


@dataclass
class Update(Statement):
    target: TableRef
    alias: str | None
    assignments: dict[str, str]
    condition: str | None


@dataclass
class Delete(Statement):
    target: TableRef
    alias: str | None
    condition: str | None


@dataclass
class MergeClause:
    when: Literal["matched", "notMatched", "notMatchedBySource"]
    condition: str | None
    action: Literal["update", "updateAll", "delete", "insert", "insertAll"]
    assignments: dict[str, str] = field(default_factory=dict)


@dataclass
class Merge(Statement):
    target: TableRef
    alias: str | None
    source: tuple[int, int]  # span of the source table / view / (subquery)
    source_alias: str | None
    condition: str
    clauses: list[MergeClause]


@dataclass
class DescribeHistory(Statement):
    target: TableRef
    limit: int | None = None


@dataclass
class DescribeDetail(Statement):
    target: TableRef


@dataclass
class DescribeTable(Statement):
    target: TableRef


@dataclass
class Vacuum(Statement):
    target: TableRef
    hours: float | None = None
    dry_run: bool = False
    inventory: bool = False


@dataclass
class Optimize(Statement):
    target: TableRef
    where: str | None = None
    zorder: list[str] | None = None


@dataclass
class Restore(Statement):
    target: TableRef
    version: int | None = None
    timestamp: str | None = None


@dataclass
class Generate(Statement):
    target: TableRef
    mode: str


@dataclass
class Convert(Statement):
    path: str
    partition_schema: str | None = None


@dataclass
class SetProperties(Statement):
    target: TableRef
    properties: dict[str, str]


@dataclass
class AddConstraint(Statement):
    """``ALTER TABLE t ADD CONSTRAINT name CHECK (predicate)``."""

    target: TableRef
    name: str
    expression: str


@dataclass
class DropConstraint(Statement):
    """``ALTER TABLE t DROP CONSTRAINT [IF EXISTS] name``."""

    target: TableRef
    name: str
    if_exists: bool = False


@dataclass
class RenameColumn(Statement):
    """``ALTER TABLE t RENAME COLUMN a[.b] TO c`` (column mapping needed)."""

    target: TableRef
    column: str
    new_name: str


@dataclass
class DropColumns(Statement):
    """``ALTER TABLE t DROP COLUMN[S] [IF EXISTS] a[, b] | (a, b)`` (column mapping needed)."""

    target: TableRef
    columns: list[str]
    if_exists: bool = False


@dataclass
class Other(Statement):
    """A statement lakefeed does not run (``DROP TABLE``, ``SHOW PARTITIONS``, ``ALTER TABLE
    ... ADD COLUMNS``...): refused when it names a Delta table, else Spark's."""

    target: TableRef
    what: str


# -- the parser ---------------------------------------------------------------------------------

_QUERY_STARTS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}
_KINDS = {"FUNCTION", "DATABASE", "SCHEMA", "CATALOG", "QUERY", "SELECT", "WITH", "VALUES"}
_OTHER = {"DROP", "SHOW", "ALTER", "TRUNCATE", "CACHE", "UNCACHE", "REFRESH", "ANALYZE", "MSCK"}
_MAYBE = re.compile(
    r"delta\s*\.|\b(?:from|join|update|merge|vacuum|optimize|restore|generate|convert|describe|"
    r"desc|insert|create|replace|alter|delete|drop|show|truncate|table_changes\w*)\b",
    re.IGNORECASE,
)


def maybe_delta(text: str) -> bool:
    """The cheap pre-check: False when no statement or table reference Delta could serve is
    in the text (``SET``, ``SHOW TABLES``-free text, expressions...)."""
    return _MAYBE.search(text) is not None


class _Cursor(Cursor):
    """The hand grammar's cursor, refusing with Delta's SQL error; Delta's tables with their
    time travel."""

    error = DeltaSqlError

    def alias(self) -> str | None:
        """An optional ``[AS] alias`` after a table."""
        explicit = self.take("AS")
        token = self.peek()
        if token is None or token.kind not in ("word", "quoted"):
            return None
        if token.kind == "word" and token.upper in CLAUSE_END and not explicit:
            return None
        self.i += 1
        return token.value

    def table(self) -> TableRef:
        """A table: ``delta.`path```, a quoted path, or a (multi-part) name; with time travel."""
        first = self.peek()
        if first is None:
            self.next()
        assert first is not None
        if first.kind == "string":
            self.i += 1
            ref = TableRef(first.start, first.end, path=first.value)
        elif first.kind in ("word", "quoted"):
            ref, self.i = name_at(self.text, self.toks, self.i)
        else:
            raise DeltaSqlError(
                f"expected a table name or delta.`path` but found {first.text!r}",
                fix="name the table, or give its path as delta.`/path/to/table`",
            )
        self.i = time_travel(self.text, self.toks, self.i, ref)
        return ref


# -- statements ---------------------------------------------------------------------------------


def parse(text: str) -> Statement | None:
    """The statement ``text`` holds; None when nothing in it can concern a Delta table."""
    if not maybe_delta(text):
        return None
    query = _QUERY_HEAD.match(text) is not None  # the parser's alone: no hand grammar pass
    toks = [] if query else tokens(text)
    if not query and not toks:
        return None
    statement = None if query else _statement(_Cursor(text, toks))
    found = _references(text, statement)
    if statement is None and found is None:
        return Query(readable=False) if query or _may_read(toks) else None
    if statement is None:
        statement = Query()
    target = getattr(statement, "target", None)
    if found is not None and found.target is not None and target is not None:
        statement.target = target = found.target  # type: ignore[attr-defined]
    reads = found.reads if found is not None else []
    statement.reads = [r for r in reads if target is None or not _inside(r, target)]
    if isinstance(statement, Query) and statement.readable and not statement.reads:
        return None
    return statement


_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?:(?:EXTENDED|CODEGEN|COST|FORMATTED)\s+)?", re.IGNORECASE)
_QUERY_HEAD = re.compile(r"\s*(?:\(|(?:SELECT|WITH|FROM|VALUES|TABLE)\b)", re.IGNORECASE)


def _references(text: str, statement: Statement | None) -> References | None:
    """The parser's references of ``text``; when it cannot read the whole statement (one of
    Delta's: ``REPLACE TABLE``, ``INSERT ... REPLACE WHERE``, ``MERGE WITH SCHEMA
    EVOLUTION``...), those of the query or source the hand grammar cut out of it."""
    if isinstance(statement, _UTILITIES):
        return References()  # Delta's utility statements read no table
    found = references(text)
    explained = _EXPLAIN.match(text) if found is None and statement is None else None
    if explained is not None:  # EXPLAIN [mode] <statement>: the statement's references
        return _references_in(text, (explained.end(), len(text)), "")
    if found is not None or statement is None:
        return found
    if isinstance(statement, (CreateTable, Insert)) and statement.query is not None:
        return _references_in(text, statement.query, "")
    if isinstance(statement, Merge):
        return _references_in(text, statement.source, "SELECT * FROM ")
    return References()  # Delta's utility statements read no table


_UTILITIES = (
    DescribeHistory,
    DescribeDetail,
    Vacuum,
    Optimize,
    Restore,
    Generate,
    Convert,
    SetProperties,
)


def _references_in(text: str, span: tuple[int, int], prefix: str) -> References | None:
    """The references of the piece of ``text`` at ``span`` (after ``prefix``), placed in
    ``text``; None when the parser cannot read it either."""
    found = references(prefix + text[span[0] : span[1]])
    if found is None:
        return None
    shift = span[0] - len(prefix)
    for ref in found.reads:
        ref.start, ref.end = ref.start + shift, ref.end + shift
    return References(found.reads)


def _may_read(toks: list[Token]) -> bool:
    """Whether a statement the parser could not read may read a table: a query, or text
    naming a ``delta.`path```."""
    if _starts_query(toks[0]):
        return True
    triples = zip(toks, toks[1:], toks[2:], strict=False)
    return any(a.upper == "DELTA" and b.text == "." and c.kind == "quoted" for a, b, c in triples)


def _inside(ref: TableRef, target: TableRef) -> bool:
    return target.start <= ref.start < target.end


def _statement(c: _Cursor) -> Statement | None:  # noqa: PLR0911 - one branch per statement
    if c.at("CREATE") or c.at("REPLACE"):
        return _create(c)
    if c.at("INSERT"):
        return _insert(c)
    if c.take("UPDATE"):
        return _update(c)
    if c.take("DELETE", "FROM"):
        target = c.table()
        alias = c.alias()
        return Delete(target, alias, c.expression(set()) if c.take("WHERE") else None)
    if c.take("MERGE"):
        return _merge(c)
    if c.at("DESCRIBE") or c.at("DESC"):
        return _describe(c)
    if c.take("VACUUM"):
        return _vacuum(c)
    if c.take("OPTIMIZE"):
        target = c.table()
        where = c.expression({"ZORDER"}) if c.take("WHERE") else None
        zorder = c.word_list() if c.take("ZORDER", "BY") else None
        return Optimize(target, where, zorder)
    if c.take("RESTORE"):
        return _restore(c)
    if c.take("GENERATE"):
        mode = c.next().text
        c.need("FOR", "TABLE")
        return Generate(c.table(), mode)
    if c.take("CONVERT", "TO", "DELTA"):
        return _convert(c)
    if c.at("ALTER", "TABLE"):
        return _alter(c)
    first = c.peek()
    if first is not None and first.upper in _OTHER:
        return _other(c)
    return None


def _create(c: _Cursor) -> Statement | None:
    mode: Literal["create", "createIfNotExists", "replace", "createOrReplace"]
    if c.take("REPLACE", "TABLE"):
        mode = "replace"
    elif c.take("CREATE", "OR", "REPLACE", "TABLE"):
        mode = "createOrReplace"
    elif c.take("CREATE", "TABLE"):
        mode = "createIfNotExists" if c.take("IF", "NOT", "EXISTS") else "create"
    else:
        return None  # CREATE VIEW / FUNCTION / DATABASE...: Spark's
    statement = CreateTable(c.table(), mode)
    if c.at("("):
        statement.columns = [column(item, _Cursor) for item in c.parenthesized(COLUMN_LIST)]
    while not c.done():
        if c.take("USING"):
            statement.using = c.next().text.lower()
        elif c.take("PARTITIONED", "BY"):
            statement.partitioned_by = [item.split()[0] for item in c.word_list()]
        elif c.take("CLUSTER", "BY"):
            statement.clustered_by = c.word_list()
        elif c.take("LOCATION"):
            statement.location = c.string()
        elif c.take("COMMENT"):
            statement.comment = c.string()
        elif c.take("TBLPROPERTIES") or c.take("OPTIONS"):
            statement.properties.update(_properties(c))
        elif c.take("SHALLOW", "CLONE") or c.take("DEEP", "CLONE") or c.take("CLONE"):
            statement.clone = True
            c.i = len(c.toks)
        elif c.take("AS"):
            start = c.peek()
            statement.query = (start.start if start else len(c.text), _end(c))
            c.i = len(c.toks)
        elif _starts_query(c.peek()):  # CTAS without AS
            statement.query = (c.next().start, _end(c))
            c.i = len(c.toks)
        else:
            c.unexpected("CREATE TABLE", "USING DELTA, PARTITIONED BY, LOCATION, COMMENT, ...")
    return statement


def _starts_query(token: Token | None) -> bool:
    return token is not None and (token.upper in _QUERY_STARTS or token.text == "(")


def _end(c: _Cursor) -> int:
    """The end of the statement's text (before a trailing ``;``)."""
    last = c.toks[-1]
    return last.start if last.text == ";" else len(c.text)


def _properties(c: _Cursor) -> dict[str, str]:
    """``('key' = 'value', key.part = value, key 'value', ...)`` (Spark's ``propertyList``)."""
    found = {}
    for item in c.parenthesized():
        toks = tokens(item)
        if not toks:
            continue
        at = 1
        if toks[0].kind != "string":
            while at + 1 < len(toks) and toks[at].text == "." and toks[at + 1].kind != "string":
                at += 2
        key = "".join(t.value for t in toks[:at])
        at += at < len(toks) and toks[at].text == "="
        rest = toks[at:]
        found[key] = rest[0].value if len(rest) == 1 else item[rest[0].start :] if rest else ""
    return found


def _insert(c: _Cursor) -> Insert:
    c.need("INSERT")
    unsupported = "INSERT WITH SCHEMA EVOLUTION" if c.take("WITH", "SCHEMA", "EVOLUTION") else None
    overwrite = c.take("OVERWRITE")
    if not overwrite:
        c.need("INTO")
    c.take("TABLE")
    target = c.table()
    if c.at("PARTITION"):
        unsupported = "INSERT ... PARTITION (...)"
        c.next()
        c.parenthesized()
    if c.take("REPLACE"):
        unsupported = "INSERT ... REPLACE WHERE/USING"
    if c.at("BY", "NAME"):
        unsupported = "INSERT ... BY NAME"
    columns = None
    if c.at("(") and (c.peek(1) is None or (c.peek(1) or c.toks[0]).upper not in _QUERY_STARTS):
        columns = c.word_list()
    start = c.peek()
    query = (start.start if start else len(c.text), _end(c))
    c.i = len(c.toks)
    return Insert(target, overwrite, columns, query, unsupported)


def _assignments(c: _Cursor, stops: set[str]) -> dict[str, str]:
    """``a = expr, t.b = expr`` up to a top-level keyword of ``stops``."""
    found = {}
    while True:
        column = c.expression({"="}).strip()
        c.need("=")
        found[column] = c.expression(stops | {","}).strip()
        if not c.take(","):
            return found


def _update(c: _Cursor) -> Update:
    target = c.table()
    alias = c.alias()
    condition = None
    if c.take("WHERE"):  # Delta also takes UPDATE t WHERE ... SET ...
        condition = c.expression({"SET"})
    c.need("SET")
    assignments = _assignments(c, {"WHERE"})
    if c.take("WHERE"):
        condition = c.expression(set())
    return Update(target, alias, assignments, condition)


_WHEN_STOPS = {"WHEN"}


def _merge(c: _Cursor) -> Merge:
    c.take("WITH", "SCHEMA", "EVOLUTION")
    c.need("INTO")
    target = c.table()
    alias = c.alias()
    c.need("USING")
    start = c.peek()
    if start is not None and start.text == "(":
        c.parenthesized()
        source = (start.start, c.toks[c.i - 1].end)
    else:
        ref = c.table()
        source = (ref.start, ref.end)
    source_alias = c.alias()
    c.need("ON")
    condition = c.expression(_WHEN_STOPS)
    clauses = []
    while c.take("WHEN"):
        clauses.append(_merge_clause(c))
    if not clauses:
        raise DeltaSqlError(
            "MERGE needs at least one WHEN clause", fix="add WHEN MATCHED / WHEN NOT MATCHED"
        )
    return Merge(target, alias, source, source_alias, condition, clauses)


def _merge_clause(c: _Cursor) -> MergeClause:
    when: Literal["matched", "notMatched", "notMatchedBySource"]
    if c.take("MATCHED"):
        when = "matched"
    elif c.take("NOT", "MATCHED", "BY", "SOURCE"):
        when = "notMatchedBySource"
    else:
        c.need("NOT", "MATCHED")
        c.take("BY", "TARGET")
        when = "notMatched"
    condition = c.expression({"THEN", "UPDATE", "DELETE", "INSERT"}) if c.take("AND") else None
    c.take("THEN")
    if c.take("DELETE"):
        return MergeClause(when, condition, "delete")
    if c.take("UPDATE", "SET", "*"):
        return MergeClause(when, condition, "updateAll")
    if c.take("UPDATE", "SET"):
        return MergeClause(when, condition, "update", _assignments(c, _WHEN_STOPS))
    if c.take("INSERT", "*"):
        return MergeClause(when, condition, "insertAll")
    c.need("INSERT")
    columns = c.word_list()
    c.need("VALUES")
    values = c.parenthesized()
    if len(columns) != len(values):
        raise DeltaSqlError(
            f"MERGE INSERT lists {len(columns)} columns but {len(values)} values",
            fix="give one value per column",
        )
    return MergeClause(when, condition, "insert", dict(zip(columns, values, strict=True)))


def _describe(c: _Cursor) -> Statement | None:
    c.next()
    if c.take("HISTORY"):
        target = c.table()
        return DescribeHistory(target, c.integer() if c.take("LIMIT") else None)
    if c.take("DETAIL"):
        return DescribeDetail(c.table())
    c.take("TABLE") or c.take("EXTENDED") or c.take("FORMATTED")
    token = c.peek()
    if token is None or token.kind not in ("string", "word", "quoted") or token.upper in _KINDS:
        return None  # DESCRIBE FUNCTION / DATABASE / QUERY...: Spark's
    return DescribeTable(c.table())


def _vacuum(c: _Cursor) -> Vacuum:
    statement = Vacuum(c.table())
    while not c.done():
        if c.take("RETAIN"):
            token = c.next()
            statement.hours = float(token.text)
            c.need("HOURS")
        elif c.take("DRY", "RUN"):
            statement.dry_run = True
        elif c.take("LITE") or c.take("FULL"):
            pass
        elif c.take("USING", "INVENTORY"):
            statement.inventory = True
            c.i = len(c.toks)
        else:
            c.unexpected("VACUUM", "VACUUM <table> [RETAIN n HOURS] [DRY RUN]")
    return statement


def _restore(c: _Cursor) -> Restore:
    c.take("TABLE")
    statement = Restore(c.table())
    if statement.target.version is not None or statement.target.timestamp is not None:
        statement.version, statement.timestamp = (
            statement.target.version,
            statement.target.timestamp,
        )
        statement.target.version = statement.target.timestamp = None
        return statement
    c.take("TO")
    if c.take("VERSION", "AS", "OF"):
        statement.version = c.integer()
    else:
        c.need("TIMESTAMP", "AS", "OF")
        statement.timestamp = c.string()
    return statement


def _convert(c: _Cursor) -> Convert:
    head, dot, path = c.next(), c.next(), c.next()
    if head.upper != "PARQUET" or dot.text != "." or path.kind != "quoted":
        raise DeltaSqlError(
            f"CONVERT TO DELTA converts parquet.`/path`, not {c.text[head.start : path.end]}",
            fix="name the Parquet folder as parquet.`/path/to/folder`",
            code=NOT_PARQUET,
        )
    statement = Convert(path.value)
    while not c.done():
        if c.take("NO", "STATISTICS"):
            continue
        c.need("PARTITIONED", "BY")
        statement.partition_schema = ", ".join(c.parenthesized())
    return statement


def _alter(c: _Cursor) -> Statement:
    c.need("ALTER", "TABLE")
    target = c.table()
    if c.take("SET", "TBLPROPERTIES"):
        return SetProperties(target, _properties(c))
    if c.take("ADD", "CONSTRAINT"):
        name = c.next().value
        c.need("CHECK")
        start, end = c.span_until({";"})
        return AddConstraint(target, name, _outer(c.text[start:end]))
    if c.take("DROP", "CONSTRAINT"):
        if_exists = c.take("IF", "EXISTS")
        return DropConstraint(target, c.next().value, if_exists)
    if c.take("RENAME", "COLUMN"):
        column = _column_path(c)
        c.need("TO")
        return RenameColumn(target, column, c.next().value)
    if c.take("DROP", "COLUMN") or c.take("DROP", "COLUMNS"):
        if_exists = c.take("IF", "EXISTS")
        bracketed = c.take("(")
        columns = [_column_path(c)]
        while c.take(","):
            columns.append(_column_path(c))
        if bracketed:
            c.need(")")
        return DropColumns(target, columns, if_exists)
    rest = " ".join(t.text.upper() for t in c.toks[c.i : c.i + 2])
    return Other(target, f"ALTER TABLE ... {rest}")


def _column_path(c: _Cursor) -> str:
    """A column, or a nested field as ``a.b``."""
    parts = [c.next().value]
    while c.take("."):
        parts.append(c.next().value)
    return ".".join(parts)


def _outer(text: str) -> str:
    """A CHECK predicate without its one pair of enclosing parentheses (as Delta stores it)."""
    text = text.strip()
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0 and index < len(text) - 1:
            return text  # "(a) AND (b)": the first pair closes early
    return text[1:-1].strip()


def _other(c: _Cursor) -> Statement | None:
    """The table a ``DROP``/``SHOW``/``TRUNCATE``... statement names, if it names one."""
    head = c.next()
    while not c.done():
        token = c.peek()
        assert token is not None
        if token.kind == "string" or token.upper == "DELTA":
            return Other(c.table(), head.upper)
        if token.upper in ("TABLE", "PARTITIONS", "TBLPROPERTIES", "COLUMNS"):
            c.i += 1
            c.take("IF", "EXISTS")
            c.take("FROM") or c.take("IN")
            after = c.peek()
            if after is not None and after.kind in ("word", "quoted", "string"):
                return Other(c.table(), f"{head.upper} {token.upper}")
            return None
        c.i += 1
    return None
