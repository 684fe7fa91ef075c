"""Delta SQL text → small typed statements, without Spark.

Spark's parser knows ``delta.`/path``` only as a two-part name and none of Delta's own
statements (``DESCRIBE HISTORY``, ``VACUUM``, ``OPTIMIZE``, ``RESTORE``...), and Spark
Connect has no parser to ask: this module reads the text itself, at the level Delta's grammar
(``DeltaSqlBase.g4``) and Spark's DML need. Expressions (conditions, values, queries) are never
parsed: they are kept as the user's text, cut at the keywords that end them outside quotes and
parentheses, and handed to Spark or to the Delta engine as they are.

:func:`parse` gives one statement object; every table reference a query reads
(``delta.`p```, with ``VERSION AS OF`` / ``TIMESTAMP AS OF`` / ``@v<n>``; names after
``FROM``/``JOIN``; ``table_changes(...)``) is listed in its ``reads`` with its span in the text,
so the adapter (:mod:`lakefeed.delta.sql.run`) can put a temporary view of lakefeed's Delta read
in its place. Nothing here decides whether a plain name is a Delta table: that needs the session.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, NoReturn

from lakefeed.errors import DeltaError, register_code


class DeltaSqlError(DeltaError, ValueError):
    """Delta SQL text lakefeed cannot read, or a Delta statement it cannot run."""

    code = "DELTA_SQL"


NOT_PARQUET = register_code("DELTA_CONVERT_NON_PARQUET_TABLE", DeltaSqlError)

# -- tokens -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
   |(?P<string>[rR]?'(?:[^'\\]|\\.)*'|[rR]?"(?:[^"\\]|\\.)*")
   |(?P<quoted>`(?:[^`]|``)*`)
   |(?P<word>[A-Za-z_][A-Za-z_0-9$]*)
   |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[A-Za-z]*|\.\d+)
   |(?P<op><=>|==|!=|<>|<=|>=|\|\||::|.)
    """,
    re.DOTALL | re.VERBOSE,
)


class Token(NamedTuple):
    """One token (a tuple: the parser makes one per word of every statement it sees)."""

    kind: str  # word, quoted, string, number, op
    text: str
    start: int
    end: int
    upper: str  # a word's text upper-cased, else ""

    @property
    def value(self) -> str:
        """A quoted identifier's or a string literal's content; else the text."""
        if self.kind == "quoted":
            return self.text[1:-1].replace("``", "`")
        if self.kind == "string":
            body = self.text[1:] if self.text[0] in "rR" else self.text
            return re.sub(r"\\(.)", r"\1", body[1:-1])
        return self.text


def tokens(text: str) -> list[Token]:
    """The tokens of ``text`` (comments and spaces dropped)."""
    found = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "op"
        if kind != "space":
            word = match.group()
            upper = word.upper() if kind == "word" else ""
            found.append(Token(kind, word, match.start(), match.end(), upper))
    return found


# -- path identifiers ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"^\s*(delta|parquet)\s*\.\s*`((?:[^`]|``)+)`\s*$", re.IGNORECASE)
_SUFFIX = re.compile(r"^(.*)@(?:v(\d+)|(\d{17}))$", re.DOTALL)


def path_identifier(identifier: str, kind: str = "delta") -> str | None:
    """The path of Delta's ``delta.`/path``` (or ``parquet.`/path```) identifier, else None."""
    match = _IDENTIFIER.match(identifier)
    if match is None or match.group(1).lower() != kind:
        return None
    return match.group(2).replace("``", "`")


def split_time_travel(path: str) -> tuple[str, int | None, str | None]:
    """Delta's ``@v<n>`` / ``@<yyyyMMddHHmmssSSS>`` suffix of a path: (path, version, time)."""
    match = _SUFFIX.match(path)
    if match is None:
        return path, None, None
    if match.group(2) is not None:
        return match.group(1), int(match.group(2)), None
    stamp = dt.datetime.strptime(match.group(3), "%Y%m%d%H%M%S%f")
    return match.group(1), None, stamp.isoformat(sep=" ", timespec="milliseconds")


# -- statements ---------------------------------------------------------------------------------


@dataclass
class TableRef:
    """One table a statement names: a path (``delta.`p```, a quoted path) or a name; with the
    version / timestamp to read, and its span in the text."""

    start: int
    end: int
    path: str | None = None
    name: str | None = None
    version: int | None = None
    timestamp: str | None = None
    timestamp_expression: str | None = None  # TIMESTAMP AS OF <expression>, for Spark
    changes: tuple[str, ...] | None = None  # table_changes(...) arguments after the table

    def describe(self) -> str:
        return f"delta.`{self.path}`" if self.path is not None else str(self.name)

    @property
    def last_name(self) -> str | None:
        """The name a column may be qualified with (``people10m.id``)."""
        return self.name.split(".")[-1].strip("`") if self.name else None


@dataclass
class Statement:
    """Base: the whole text and the tables its queries read."""

    reads: list[TableRef] = field(default_factory=list, kw_only=True)


@dataclass
class Query(Statement):
    """Anything else: Spark runs it once its reads are rewritten."""


@dataclass
class Column:
    name: str
    type: str
    nullable: bool = True
    generated: str | None = None
    comment: str | None = None
    identity: bool = False


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
class Other(Statement):
    """A statement lakefeed does not run (``DROP TABLE``, ``SHOW PARTITIONS``, ``ALTER TABLE
    ... ADD COLUMNS``...): refused when it names a Delta table, else Spark's."""

    target: TableRef
    what: str


# -- the parser ---------------------------------------------------------------------------------

_CLAUSE_END = {
    "WHERE", "GROUP", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "MINUS", "JOIN", "ON",
    "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "NATURAL", "SEMI", "ANTI", "LATERAL", "WINDOW",
    "HAVING", "TABLESAMPLE", "PIVOT", "UNPIVOT", "USING", "SORT", "CLUSTER", "DISTRIBUTE",
    "QUALIFY", "SET", "WHEN", "VERSION", "TIMESTAMP", "FOR", "SELECT", "VALUES", "OFFSET",
    "AS", "FROM", "TABLE", "WITH", "OUTER", "PARTITION", "REPLACE", "BY", "INTO", "OVERWRITE",
}  # fmt: skip
_QUERY_STARTS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}
_TIME_TRAVEL = {"VERSION", "SYSTEM_VERSION", "TIMESTAMP", "SYSTEM_TIME"}
_CHANGES = {"TABLE_CHANGES": "name", "TABLE_CHANGES_BY_PATH": "path"}
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


class _Cursor:
    """Tokens with a position; helpers that read keywords and cut expression text."""

    def __init__(self, text: str, toks: list[Token]) -> None:
        self.text = text
        self.toks = toks
        self.i = 0

    def peek(self, ahead: int = 0) -> Token | None:
        at = self.i + ahead
        return self.toks[at] if at < len(self.toks) else None

    def at(self, *words: str) -> bool:
        """Whether the next tokens are these keywords (``*`` / ``(``... for ops)."""
        for ahead, word in enumerate(words):
            token = self.peek(ahead)
            if token is None or (token.upper or token.text) != word:
                return False
        return True

    def take(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def need(self, *words: str) -> None:
        if not self.take(*words):
            token = self.peek()
            found = repr(token.text) if token else "the end"
            raise DeltaSqlError(
                f"expected {' '.join(words)} but found {found} in: {self.text.strip()[:200]}",
                fix="check the statement against Delta's SQL reference (docs.delta.io)",
            )

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise DeltaSqlError(
                f"the statement ends too early: {self.text.strip()[:200]}",
                fix="check the statement against Delta's SQL reference (docs.delta.io)",
            )
        self.i += 1
        return token

    def done(self) -> bool:
        token = self.peek()
        return token is None or token.text == ";"

    def span_until(self, stops: set[str], opening: str = "([{") -> tuple[int, int]:
        """From here to the first top-level keyword of ``stops`` (or the end): a char span.
        ``opening``: the brackets that nest (``<`` too in a column list: ``MAP<K, V>``)."""
        depth, first = 0, self.i
        closing = opening.translate(str.maketrans("([{<", ")]}>"))
        while not self.done():
            token = self.toks[self.i]
            if depth == 0 and (token.upper or token.text) in stops and self.i > first:
                break
            depth += token.text in opening if token.kind == "op" else 0
            depth -= token.text in closing if token.kind == "op" else 0
            if depth < 0:
                break
            self.i += 1
        if self.i == first:
            return (self.toks[first].start if first < len(self.toks) else len(self.text),) * 2
        return self.toks[first].start, self.toks[self.i - 1].end

    def expression(self, stops: set[str]) -> str:
        start, end = self.span_until(stops)
        return self.text[start:end]

    def parenthesized(self, opening: str = "([{") -> list[str]:
        """``( a, b, ... )``: the items' texts (split at top-level commas)."""
        self.need("(")
        items = []
        while True:
            start, end = self.span_until({",", ")"}, opening)
            items.append(self.text[start:end].strip())
            if self.take(")"):
                return items
            self.need(",")

    def word_list(self) -> list[str]:
        return [_unquote(item) for item in self.parenthesized()]

    def unexpected(self, statement: str, grammar: str) -> NoReturn:
        """Refuse the next token: not part of ``statement`` as lakefeed reads it."""
        token = self.next()
        raise DeltaSqlError(
            f"{statement}: lakefeed does not know {token.text!r} here",
            fix=f"write it as Delta documents it: {grammar}",
        )

    def string(self) -> str:
        token = self.next()
        if token.kind != "string":
            raise DeltaSqlError(
                f"expected a quoted string but found {token.text!r}",
                fix="quote the value: 'text'",
            )
        return token.value

    def integer(self) -> int:
        token = self.next()
        if token.kind != "number" or not token.text.isdigit():
            raise DeltaSqlError(
                f"expected a whole number but found {token.text!r}", fix="give e.g. 3"
            )
        return int(token.text)

    def alias(self) -> str | None:
        """An optional ``[AS] alias`` after a table."""
        explicit = self.take("AS")
        token = self.peek()
        if token is None or token.kind not in ("word", "quoted"):
            return None
        if token.kind == "word" and token.upper in _CLAUSE_END and not explicit:
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
        else:
            ref = _table_at(self) or self._name()
        _time_travel(self, ref)
        return ref

    def _name(self) -> TableRef:
        start = self.next()
        if start.kind not in ("word", "quoted"):
            raise DeltaSqlError(
                f"expected a table name or delta.`path` but found {start.text!r}",
                fix="name the table, or give its path as delta.`/path/to/table`",
            )
        parts, end = [start.text], start
        while self.at(".") and (self.peek(1) or start).kind in ("word", "quoted"):
            self.i += 1
            end = self.next()
            parts.append(end.text)
        return TableRef(start.start, end.end, name=".".join(parts))


def _unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") and name.endswith("`") else name


def _table_at(cursor: _Cursor) -> TableRef | None:
    """``delta.`path``` at the cursor (moved past it), else None."""
    head, dot, path = cursor.peek(), cursor.peek(1), cursor.peek(2)
    if (
        head is None
        or head.upper != "DELTA"
        or dot is None
        or dot.text != "."
        or path is None
        or path.kind != "quoted"
    ):
        return None
    cursor.i += 3
    root, version, stamp = split_time_travel(path.value)
    return TableRef(head.start, path.end, path=root, version=version, timestamp=stamp)


def _time_travel(cursor: _Cursor, ref: TableRef) -> None:
    """``[FOR] VERSION|SYSTEM_VERSION AS OF n`` / ``[FOR] TIMESTAMP|SYSTEM_TIME AS OF 'ts'``."""
    ahead = 1 if cursor.at("FOR") else 0
    token = cursor.peek(ahead)
    if token is None or token.upper not in _TIME_TRAVEL:
        return
    after = cursor.peek(ahead + 1), cursor.peek(ahead + 2)
    if not all(t is not None for t in after) or [t.upper for t in after if t] != ["AS", "OF"]:
        return
    cursor.i += ahead + 3
    value = cursor.next()
    if token.upper in ("VERSION", "SYSTEM_VERSION"):
        if value.kind == "string" and value.value.isdigit():
            ref.version = int(value.value)
        elif value.kind == "number" and value.text.isdigit():
            ref.version = int(value.text)
        else:
            raise DeltaSqlError(
                f"VERSION AS OF takes a version number, not {value.text!r}",
                fix="give e.g. VERSION AS OF 3",
            )
    elif value.kind == "string" and _clause_ends(cursor.peek()):
        ref.timestamp = value.value
    else:  # an expression: date_sub(current_date(), 1), Spark evaluates it
        cursor.i -= 1
        ref.timestamp_expression = _expression_before_alias(cursor)
        ref.end = cursor.toks[cursor.i - 1].end
        return
    ref.end = value.end


_UNITS = {
    f"{unit}{plural}"
    for unit in ("YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND")
    for plural in ("", "S")
}


def _expression_before_alias(cursor: _Cursor) -> str:
    """An expression up to a clause keyword, a comma, or an alias (a name right after an
    operand at the top level: ``date_sub(current_date(), 1) e``)."""
    depth, first, operand = 0, cursor.i, False
    while not cursor.done():
        token = cursor.toks[cursor.i]
        if depth == 0:
            is_name = token.kind in ("word", "quoted") and token.upper not in _UNITS
            if token.upper in _CLAUSE_END or token.text == "," or (operand and is_name):
                break
            ends = token.kind in ("number", "string") or token.text == ")"
            operand = ends or is_name or token.upper in _UNITS
        depth += token.text == "("
        depth -= token.text == ")"
        if depth < 0:
            break
        operand = operand or (depth == 0 and token.text == ")")
        cursor.i += 1
    return cursor.text[cursor.toks[first].start : cursor.toks[cursor.i - 1].end]


def _clause_ends(token: Token | None) -> bool:
    """Whether ``token`` cannot continue an expression (an alias, a keyword, the end)."""
    return token is None or token.kind in ("word", "quoted") or token.text in (",", ")", ";")


# -- reads anywhere in a query ------------------------------------------------------------------


def find_reads(text: str, toks: list[Token], skip: tuple[int, int] | None = None) -> list[TableRef]:
    """Every table reference a query in ``text`` reads: ``delta.`p``` anywhere, names after
    ``FROM``/``JOIN`` and the commas of a ``FROM`` clause that are not CTE names or function
    calls, and ``table_changes``/``table_changes_by_path`` calls. ``skip``: a span (the
    statement's target) whose references are not reads."""
    cursor = _Cursor(text, toks)
    ctes = _cte_names(toks)
    reads: list[TableRef] = []
    levels = [_Level(query=True)]
    while cursor.i < len(toks):
        token = toks[cursor.i]
        if skip and skip[0] <= token.start < skip[1]:
            cursor.i += 1
            continue
        if token.upper in _CHANGES and cursor.at(token.upper, "("):
            reads.append(_changes(cursor, _CHANGES[token.upper]))
            continue
        path_ref = _table_at(cursor) if token.upper == "DELTA" else None
        if path_ref is not None:
            _time_travel(cursor, path_ref)
            reads.append(path_ref)
            continue
        in_query = all(level.query for level in levels)
        cursor.i += 1
        _nest(levels, token, cursor.peek())
        starts_list = token.upper in ("FROM", "JOIN") or (token.text == "," and levels[-1].in_from)
        if starts_list and in_query:
            reads.extend(_from_list(cursor, ctes))
            levels[-1].in_from = True
        elif token.upper in _FROM_ENDS:
            levels[-1].in_from = False
    return reads


@dataclass
class _Level:
    """One parenthesis level of a query: whether it holds a query (not a function's
    arguments), and whether the scan is inside its FROM clause."""

    query: bool
    in_from: bool = False


_FROM_ENDS = {
    "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "MINUS",
    "SELECT", "WINDOW", "QUALIFY", "SORT", "CLUSTER", "DISTRIBUTE", "OFFSET", "SET", "WHEN",
}  # fmt: skip


def _nest(levels: list[_Level], token: Token, following: Token | None) -> None:
    if token.text == "(":
        levels.append(_Level(following is not None and following.upper in _QUERY_STARTS))
    elif token.text == ")" and len(levels) > 1:
        levels.pop()


def _from_list(cursor: _Cursor, ctes: set[str]) -> list[TableRef]:
    """Names after ``FROM``/``JOIN``: ``a [AS x], b ...`` (a path reference is left to the
    caller's loop, which sees every ``delta.`p```)."""
    found: list[TableRef] = []
    while True:
        token, following = cursor.peek(), cursor.peek(1)
        if token is None or token.kind not in ("word", "quoted") or token.upper == "DELTA":
            return found
        if token.kind == "word" and (token.upper in _CLAUSE_END or token.upper in _QUERY_STARTS):
            return found
        if following is not None and following.text == "(":
            return found  # a table-valued function: range(5), explode(...)
        ref = cursor._name()
        if ref.name and ref.name.lower() not in ctes:
            _time_travel(cursor, ref)
            found.append(ref)
        cursor.alias()
        if not cursor.take(","):
            return found


def _cte_names(toks: list[Token]) -> set[str]:
    """Names a ``WITH`` defines: ``WITH a AS (...), b (x, y) AS (...)``."""
    names = set()
    for index, token in enumerate(toks[:-2]):
        before = toks[index - 1] if index else None
        if before is None or (before.upper not in ("WITH", "RECURSIVE") and before.text != ","):
            continue
        following = toks[index + 1]
        if token.kind in ("word", "quoted") and (
            following.upper == "AS" or (following.text == "(" and _cte_columns(toks, index + 1))
        ):
            names.add(token.value.lower())
    return names


def _cte_columns(toks: list[Token], at: int) -> bool:
    """``name (a, b) AS (`` rather than a call: the parenthesis is followed by AS."""
    depth = 0
    for index in range(at, len(toks)):
        depth += toks[index].text == "("
        depth -= toks[index].text == ")"
        if depth == 0:
            return index + 1 < len(toks) and toks[index + 1].upper == "AS"
    return False


def _changes(cursor: _Cursor, kind: str) -> TableRef:
    """``table_changes('name', start[, end])`` / ``table_changes_by_path('/p', ...)``."""
    head = cursor.next()
    cursor.need("(")
    arguments = []
    while True:
        token = cursor.next()
        if token.kind not in ("string", "number"):
            raise DeltaSqlError(
                f"{head.text}(...) takes literals (table, start, end), not {token.text!r}",
                fix=f"e.g. {head.text.lower()}('events', 2, 5)",
            )
        arguments.append(token.text)  # bounds: a number is a version, a string a timestamp
        if cursor.take(")"):
            break
        cursor.need(",")
    if not 2 <= len(arguments) <= 3:
        raise DeltaSqlError(
            f"{head.text} takes a table and a start (and an end), got {len(arguments)} arguments",
            fix=f"e.g. {head.text.lower()}('events', 2, 5)",
        )
    end = cursor.toks[cursor.i - 1].end
    table, bounds = Token("string", arguments[0], 0, 0, "").value, tuple(arguments[1:])
    if kind == "path":
        return TableRef(head.start, end, path=table, changes=bounds)
    return TableRef(head.start, end, name=table, changes=bounds)


# -- statements ---------------------------------------------------------------------------------


def parse(text: str) -> Statement | None:
    """The statement ``text`` holds; None when nothing in it can concern a Delta table."""
    if not maybe_delta(text):
        return None
    toks = tokens(text)
    if not toks:
        return None
    cursor = _Cursor(text, toks)
    statement = _statement(cursor)
    if statement is None:
        statement = Query()
        skip = None
    else:
        target = getattr(statement, "target", None)
        skip = (target.start, target.end) if target is not None else None
    statement.reads = find_reads(text, toks, skip)
    if isinstance(statement, Query) and not statement.reads:
        return None
    return statement


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
        statement.columns = [_column(item) for item in c.parenthesized("([{<")]
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


_COLUMN_STOPS = {"NOT", "GENERATED", "COMMENT", "DEFAULT", "NULL", "CONSTRAINT", "PRIMARY"}


def _column(definition: str) -> Column:
    """``name TYPE [NOT NULL] [GENERATED ALWAYS AS (expr) | AS IDENTITY...] [COMMENT '...']``."""
    c = _Cursor(definition, tokens(definition))
    column = Column(c.next().value, c.expression(_COLUMN_STOPS).strip())
    while not c.done():
        if c.take("NOT", "NULL"):
            column.nullable = False
        elif c.take("NULL"):
            column.nullable = True
        elif c.take("COMMENT"):
            column.comment = c.string()
        elif c.take("GENERATED"):
            c.take("ALWAYS") or c.take("BY", "DEFAULT")
            c.need("AS")
            if c.take("IDENTITY"):
                column.identity = True
                if c.at("("):
                    c.parenthesized()
            else:
                c.need("(")
                column.generated = c.expression({")"})
                c.need(")")
        else:
            token = c.next()
            raise DeltaSqlError(
                f"column {column.name}: lakefeed does not know {token.text!r} in a column "
                "definition",
                fix="use name TYPE [NOT NULL] [GENERATED ALWAYS AS (expr)] [COMMENT '...']",
            )
    return column


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
    rest = " ".join(t.text.upper() for t in c.toks[c.i : c.i + 2])
    return Other(target, f"ALTER TABLE ... {rest}")


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
