"""SQL pipeline files: DLT/SDP-style ``CREATE STREAMING TABLE ... AS SELECT`` statements.

Parsed without Spark into flow definitions. The statement around the query (``CREATE ...
AS``, constraints, AUTO CDC clauses) is read by a small hand grammar over lakefeed's tokenizer
(:mod:`lakefeed.sql.tokens`); the query itself by sqlglot (:mod:`lakefeed.sql.references`,
Databricks' dialect for ``STREAM``), which tells the tables it reads from CTE names, aliases
and subqueries. Each dataset the query reads (``STREAM(x)``, ``STREAM x``, ``LIVE.x`` or a
one-part name) is recorded and later swapped for a temporary view holding the right DataFrame,
so SQL and Python flows mix in one pipeline and the graph sees SQL reads like Python ones.

Supported::

    CREATE [OR REFRESH] STREAMING TABLE name
      [(CONSTRAINT rule EXPECT (predicate) [ON VIOLATION {DROP ROW | FAIL UPDATE}], ...)]
      [PARTITIONED BY (col, ...)] [COMMENT 'text'] [TBLPROPERTIES (...)]
      AS query
    CREATE [OR REFRESH] MATERIALIZED VIEW name ... AS query
    CREATE [TEMPORARY] [LIVE] VIEW name ... AS query
    CREATE [OR REFRESH] STREAMING TABLE name [...]           -- filled by flows
    APPLY CHANGES INTO name FROM STREAM(source) KEYS (...) ...   -- AUTO CDC, see lakefeed.cdc.sql
    CREATE FLOW flow AS AUTO CDC [ONCE] INTO name FROM [STREAM(]source[)] KEYS (...) ...
    CREATE FLOW flow [COMMENT 'text'] AS INSERT [ONCE] INTO [ONCE] name [BY NAME] query
                                                          -- append flow; ONCE: a backfill
    CREATE [OR REFRESH] STREAMING TABLE name FLOW AUTO CDC FROM STREAM(source) KEYS (...) ...

A query may read landing files with Databricks' ``[STREAM] read_files('/path', format =>
'json', ...)`` or ``cloud_files('/path', 'json'[, map(...)])``: lakefeed's files source
(:func:`lakefeed.read_files`) with the same options, its hidden ``_metadata`` column kept only
where the query names it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakefeed.cdc.sql import parse_body
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline.errors import (
    CLUSTERING_UNSUPPORTED,
    PipelineError,
    SqlQueryError,
)
from lakefeed.pipeline.expectations import Action, Expectation
from lakefeed.pipeline.kinds import DatasetKind
from lakefeed.sql.errors import SqlTextError
from lakefeed.sql.references import FilesRead, dataset_name, references
from lakefeed.sql.tokens import matching_paren, split_statements

KINDS = {
    "STREAMING TABLE": DatasetKind.STREAMING_TABLE,
    "STREAMING LIVE TABLE": DatasetKind.STREAMING_TABLE,
    "MATERIALIZED VIEW": DatasetKind.MATERIALIZED_VIEW,
    "LIVE TABLE": DatasetKind.MATERIALIZED_VIEW,
    "VIEW": DatasetKind.VIEW,
    "TEMPORARY VIEW": DatasetKind.VIEW,
    "TEMPORARY LIVE VIEW": DatasetKind.VIEW,
    "LIVE VIEW": DatasetKind.VIEW,
}

_HEAD = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REFRESH\s+|OR\s+REPLACE\s+)?"
    r"(?P<kind>STREAMING\s+(?:LIVE\s+)?TABLE|MATERIALIZED\s+VIEW|LIVE\s+TABLE|"
    r"(?:TEMPORARY\s+)?(?:LIVE\s+)?VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(?:LIVE\.)?(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,2})\s*",
    re.IGNORECASE,
)
_AS = re.compile(r"\bAS\b", re.IGNORECASE)
_CONSTRAINT = re.compile(
    r"\s*CONSTRAINT\s+(?P<name>[A-Za-z0-9_]+)\s+EXPECT\s*(?=\()", re.IGNORECASE
)
_VIOLATION = re.compile(
    r"\s*(?:ON\s+VIOLATION\s+(?P<action>DROP\s+ROW|FAIL\s+UPDATE))?\s*(?:,|$)", re.IGNORECASE
)
_PARTITIONED = re.compile(r"PARTITIONED\s+BY\s*\((?P<cols>[^)]*)\)\s*", re.IGNORECASE)
_COMMENT = re.compile(r"COMMENT\s+'(?P<text>(?:[^']|'')*)'\s*", re.IGNORECASE)
_CLUSTER = re.compile(r"CLUSTER\s+BY\s*\((?P<cols>[^)]*)\)\s*", re.IGNORECASE)
_CLUSTER_AUTO = re.compile(r"CLUSTER\s+BY\s+AUTO\b", re.IGNORECASE)
_TBLPROPS = re.compile(r"TBLPROPERTIES\s*\((?P<props>[^)]*)\)\s*", re.IGNORECASE)


@dataclass
class SqlFlow:
    """One ``CREATE ...`` statement; ``query`` still names datasets as written."""

    name: str
    kind: DatasetKind
    query: str
    source: str
    stream_reads: list[str] = field(default_factory=list)
    batch_reads: list[str] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    partition_cols: list[str] = field(default_factory=list)
    cluster_by: list[str] = field(default_factory=list)
    comment: str | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    path: str = "<sql>"  # the file, and the file's line where the query after AS starts
    query_line: int = 1
    declared: bool = False  # a streaming table without a query: flows fill it
    cdc: dict[str, Any] | None = None  # an AUTO CDC flow into ``name``: its arguments
    flow_name: str | None = None  # CREATE FLOW's name
    append: bool = False  # CREATE FLOW ... INSERT INTO: an append flow into ``name``
    once: bool = False  # INSERT ONCE INTO / AUTO CDC ONCE INTO: a one-off batch backfill
    reads: list[tuple[int, int, str, bool]] = field(default_factory=list)  # span, name, stream
    files: list[FilesRead] = field(default_factory=list)  # read_files(...) / cloud_files(...)

    def render(self, view_for: dict[tuple[str, bool], str], file_views: Sequence[str] = ()) -> str:
        """The query with each dataset reference replaced by its temporary view name, and
        each files read by its own (``file_views``, in the order of :attr:`files`)."""
        spans = [
            (start, end, view_for.get((name, stream))) for start, end, name, stream in self.reads
        ]
        spans += [(f.start, f.end, view) for f, view in zip(self.files, file_views, strict=True)]
        text = self.query
        for start, end, view in sorted(spans, reverse=True):
            if view is not None:
                text = text[:start] + view + text[end:]
        return text


def parse_statement(statement: str, source: str, line: int = 1) -> SqlFlow:
    where = f"{source}:{line}: {statement.split(chr(10))[0][:80]!r}"
    into = _INTO.match(statement)
    if into is not None:  # APPLY CHANGES INTO / CREATE FLOW ... AS AUTO CDC INTO
        flow = SqlFlow(into.group("target"), DatasetKind.STREAMING_TABLE, "", f"{source}:{line}")
        flow.flow_name, flow.path = into.group("flow"), source
        flow.once = into.group("once") is not None
        flow.cdc = _cdc_body(statement[into.end() :], where)
        return flow
    insert = _INSERT.match(statement)
    if insert is not None:
        return _append_flow(statement, insert, source, line, where)
    if _CREATE_FLOW.match(statement):
        raise PipelineError([f"{where}: {_FLOW_FORMS}"])
    head = _HEAD.match(statement)
    if head is None:
        raise PipelineError(
            [
                f"{where}: expected CREATE STREAMING TABLE | MATERIALIZED VIEW | VIEW name ... "
                "AS query"
            ]
        )
    kind = KINDS[" ".join(head.group("kind").upper().split())]
    flow = SqlFlow(name=head.group("name"), kind=kind, query="", source=f"{source}:{line}")
    flow.path = source
    rest = statement[head.end() :]
    if rest.startswith("("):
        close = matching_paren(rest)
        if close < 0:
            raise PipelineError([f"{where}: unbalanced parenthesis in the column/constraint list"])
        _parse_constraints(rest[1:close], flow, where)
        rest = rest[close + 1 :].lstrip()
    rest = _parse_clauses(rest, flow)
    if kind is DatasetKind.STREAMING_TABLE and not _AS.match(rest):
        flow.declared = True  # filled by flows: ``FLOW AUTO CDC ...`` here, or others
        auto = _FLOW_AUTO_CDC.match(rest)
        if auto is not None:
            flow.cdc = _cdc_body(rest[auto.end() :], where)
        elif rest.strip():
            raise PipelineError(
                [f"{where}: expected AS <query> or FLOW AUTO CDC, found {rest[:40]!r}"]
            )
        return flow
    as_match = _AS.match(rest)
    if as_match is None:
        raise PipelineError(
            [f"{where}: expected AS <query> after the clauses, found {rest[:40]!r}"]
        )
    return _with_query(flow, statement, rest[as_match.end() :], line, where)


def _with_query(flow: SqlFlow, statement: str, after: str, line: int, where: str) -> SqlFlow:
    """``flow`` with its query, the text ``after`` the statement's head, and what it reads."""
    flow.query = after.strip()
    start = len(statement) - len(after.lstrip())
    flow.query_line = line + statement.count("\n", 0, start)
    if not flow.query:
        raise PipelineError([f"{where}: empty query after AS"])
    _collect_reads(flow, where)
    return flow


def _append_flow(
    statement: str, insert: re.Match[str], source: str, line: int, where: str
) -> SqlFlow:
    """``CREATE FLOW f AS INSERT [ONCE] INTO target query``: an append flow into ``target``
    (a streaming table or a sink), a one-off batch backfill with ``ONCE`` (DLT's older
    spelling ``INSERT INTO ONCE`` too)."""
    flow = SqlFlow(insert.group("target"), DatasetKind.STREAMING_TABLE, "", f"{source}:{line}")
    flow.path, flow.flow_name, flow.append = source, insert.group("flow"), True
    flow.once = insert.group("once") is not None or insert.group("once_first") is not None
    comment = insert.group("comment")
    flow.comment = comment.replace("''", "'") if comment is not None else None
    return _with_query(flow, statement, statement[insert.end() :], line, where)


_INTO = re.compile(
    r"^\s*(?:APPLY\s+CHANGES|CREATE\s+FLOW\s+(?P<flow>[A-Za-z_]\w*)\s+AS\s+"
    r"(?:AUTO\s+CDC(?:\s+(?P<once>ONCE))?|APPLY\s+CHANGES))\s+INTO\s+"
    r"(?:LIVE\.)?(?P<target>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,2})",
    re.IGNORECASE,
)
_INSERT = re.compile(
    r"^\s*CREATE\s+FLOW\s+(?P<flow>[A-Za-z_]\w*)\s+(?:COMMENT\s+'(?P<comment>(?:[^']|'')*)'\s+)?"
    r"AS\s+INSERT\s+(?P<once_first>ONCE\s+)?INTO\s+(?P<once>ONCE\s+)?"
    r"(?:LIVE\.)?(?P<target>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,2})"
    r"(?:\s+BY\s+NAME)?(?=\s)",
    re.IGNORECASE,
)
_CREATE_FLOW = re.compile(r"^\s*CREATE\s+FLOW\b", re.IGNORECASE)
_FLOW_FORMS = (
    "expected CREATE FLOW name [COMMENT '...'] AS INSERT [ONCE] INTO target [BY NAME] query, "
    "or AS AUTO CDC [ONCE] INTO target ...; as in SDP, a flow's name is one part and INSERT "
    "OVERWRITE, a PARTITION spec or IF NOT EXISTS are not flows"
)
_FLOW_AUTO_CDC = re.compile(r"FLOW\s+AUTO\s+CDC\b", re.IGNORECASE)


def _cdc_body(body: str, where: str) -> dict[str, Any]:
    try:
        return parse_body(body, where)
    except PipelineDefinitionError as error:
        raise PipelineError([str(error)]) from error


def parse_sql(text: str, source: str = "<sql>") -> list[SqlFlow]:
    """Every flow of a SQL pipeline file; all syntax problems reported together."""
    flows, problems = [], []
    for line, statement in split_statements(text):
        try:
            flows.append(parse_statement(statement, source, line))
        except PipelineError as error:
            problems.extend(error.problems)
    if problems:
        raise PipelineError(problems)
    return flows


def parse_sql_file(path: str | Path) -> list[SqlFlow]:
    path = Path(path)
    return parse_sql(path.read_text(), source=str(path))


def _parse_constraints(body: str, flow: SqlFlow, where: str) -> None:
    pos = 0
    while body[pos:].strip():
        head = _CONSTRAINT.match(body, pos)
        close = matching_paren(body[head.end() :]) if head else -1
        if head is None or close < 0:
            raise PipelineError(
                [
                    f"{where}: cannot read {body[pos : pos + 60].strip()!r}; column lists are "
                    "inferred, write only CONSTRAINT name EXPECT (predicate) "
                    "[ON VIOLATION DROP ROW | FAIL UPDATE], ..."
                ]
            )
        predicate = body[head.end() + 1 : head.end() + close]
        violation = _VIOLATION.match(body, head.end() + close + 1)
        if violation is None:
            raise PipelineError([f"{where}: expected ON VIOLATION DROP ROW | FAIL UPDATE or ','"])
        action = (violation.group("action") or "").upper()
        flow.expectations.append(
            Expectation(
                head.group("name"),
                predicate.strip(),
                Action.DROP
                if action.startswith("DROP")
                else Action.FAIL
                if action.startswith("FAIL")
                else Action.WARN,
            )
        )
        pos = violation.end()


def _parse_clauses(rest: str, flow: SqlFlow) -> str:
    while True:
        if _CLUSTER_AUTO.match(rest):
            raise PipelineError([str(_clustered_auto(flow))])
        for pattern in (_PARTITIONED, _CLUSTER, _COMMENT, _TBLPROPS):
            match = pattern.match(rest)
            if match is None:
                continue
            if pattern is _PARTITIONED:
                flow.partition_cols = _columns(match.group("cols"))
            elif pattern is _CLUSTER:
                flow.cluster_by = _columns(match.group("cols"))
            elif pattern is _COMMENT:
                flow.comment = match.group("text").replace("''", "'")
            else:
                flow.table_properties = _props(match.group("props"))
            rest = rest[match.end() :]
            break
        else:
            return rest


def _columns(text: str) -> list[str]:
    return [column.strip() for column in text.split(",") if column.strip()]


def _clustered_auto(flow: SqlFlow) -> PipelineDefinitionError:
    return PipelineDefinitionError(
        f"{flow.source}: {flow.name!r} is declared CLUSTER BY AUTO: automatic liquid clustering "
        "picks its columns with Databricks' predictive optimization, which lakefeed does not have",
        fix="name the columns: CLUSTER BY (col, ...)",
        code=CLUSTERING_UNSUPPORTED,
    )


def _props(text: str) -> dict[str, str]:
    props = {}
    for item in text.split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            props[key.strip().strip("'\"")] = value.strip().strip("'\"")
    return props


def _collect_reads(flow: SqlFlow, where: str) -> None:
    """The tables ``flow``'s query reads, as sqlglot's parser finds them (a CTE name is no
    read at all): each a dataset when the pipeline defines it (``x``, ``LIVE.x``, ``db.x`` in
    its database), else Spark's table; and its files reads (``read_files`` / ``cloud_files``)."""
    try:
        found = references(flow.query, "databricks")
    except SqlTextError as error:
        raise PipelineError([f"{where}: {error}"]) from error
    if found is None:
        raise PipelineError(
            [
                f"{where}: cannot read the query after AS; write it in Spark SQL "
                "(SELECT ... FROM STREAM(source) ...)"
            ]
        )
    for ref in found.reads:
        name = dataset_name(ref)
        if name is None:
            continue
        flow.reads.append((ref.start, ref.end, name, ref.stream))
        target = flow.stream_reads if ref.stream else flow.batch_reads
        if name not in target:
            target.append(name)
    flow.files = found.files


_SPARK_LINE = re.compile(r"\(?line (?P<line>\d+),? pos(?:ition)? \d+")


def sql_query_error(flow: SqlFlow, error: BaseException, message: str) -> SqlQueryError:
    """Spark's error for ``flow``'s query, placed at the file's line Spark's line points at."""
    found = _SPARK_LINE.search(str(error))
    line = flow.query_line + (int(found.group("line")) - 1 if found else 0)
    return SqlQueryError(message, where=f"{flow.path}:{line}")
