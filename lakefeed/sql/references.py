"""The tables a SQL statement reads and writes, found by sqlglot's parser (see the package doc).

sqlglot parses the statement (``spark`` dialect; ``databricks``, its superset, for pipeline SQL
with ``STREAM``) and a walk over its tree decides what each name is: a CTE in scope (never a
read), a DML target (``INSERT INTO t``, ``UPDATE t``, ``DELETE FROM t``, ``MERGE INTO t``,
``CREATE TABLE t``), a read, a stream read, a ``table_changes(...)`` call, or a files read
(``read_files(...)`` / ``cloud_files(...)``, Databricks' table-valued functions). Column aliases,
subqueries and comments are the parser's business, so ``SELECT id, events AS e FROM events``
reads ``events``. Each reference the tree names is then measured in the text by lakefeed's
tokenizer, from the parser's start position: its span (what the adapters replace with a view)
and its time travel clause (``VERSION AS OF``, ``TIMESTAMP AS OF``, ``@v<n>`` on a path).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from dataclasses import dataclass, field, replace

from sqlglot import exp
from sqlglot.dialects.databricks import Databricks
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError

from lakefeed.sql.errors import SqlTextError
from lakefeed.sql.tokens import Token, tokens

# sqlglot logs a warning for each statement it keeps as an opaque Command (VACUUM, OPTIMIZE...):
# those are lakefeed's hand grammar's, not news for the user.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

_DIALECTS = {"spark": Spark(), "databricks": Databricks()}


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
    stream: bool = False  # STREAM(name) / STREAM name in pipeline SQL

    def describe(self) -> str:
        return f"delta.`{self.path}`" if self.path is not None else str(self.name)

    @property
    def last_name(self) -> str | None:
        """The name a column may be qualified with (``people10m.id``)."""
        return self.name.split(".")[-1].strip("`") if self.name else None


def dataset_name(ref: TableRef) -> str | None:
    """The table name ``ref`` gives, which may be a pipeline dataset: ``x``, ```x```,
    ``db.x``, ``cat.db.x`` (the pipeline tells by its database) or ``LIVE.x`` (DLT's schema of
    the pipeline's own datasets, dropped); None for anything else (a path, a call)."""
    if ref.name is None or ref.changes is not None:
        return None
    parts = [t.value for t in tokens(ref.name) if t.kind in ("word", "quoted")]
    if len(parts) == 2 and parts[0].upper() == "LIVE":
        parts = parts[1:]
    plain = 1 <= len(parts) <= 3 and not any("." in p for p in parts)
    return ".".join(parts) if plain else None


@dataclass
class FilesRead:
    """``read_files('/path', format => 'json', ...)`` / ``cloud_files('/path', 'json',
    map(...))`` in a FROM clause: its literal arguments, positional and named, and its span
    (``STREAM`` around it included)."""

    start: int
    end: int
    function: str  # READ_FILES or CLOUD_FILES
    args: tuple[str, ...]
    named: tuple[tuple[str, str], ...]
    stream: bool = False


@dataclass
class References:
    """What a statement names: its reads in text order, its files reads, and its DML target
    (if any)."""

    reads: list[TableRef] = field(default_factory=list)
    target: TableRef | None = None
    files: list[FilesRead] = field(default_factory=list)


def references(text: str, dialect: str = "spark") -> References | None:
    """The tables ``text`` (one statement) reads and writes; None when sqlglot cannot parse it
    (Delta's utility statements, a syntax error: the caller's hand grammar or Spark decides).
    Answers are remembered by text (a stream's ``foreachBatch`` runs the same statements every
    micro-batch); each call gets its own copies to change."""
    found = _parsed(text, dialect)
    if found is None:
        return None
    return References(
        [replace(r) for r in found.reads],
        found.target and replace(found.target),
        [replace(f) for f in found.files],
    )


@functools.lru_cache(maxsize=512)
def _parsed(text: str, dialect: str) -> References | None:
    try:
        trees = [t for t in _DIALECTS[dialect].parse(_spelled(text)) if t is not None]
    except SqlglotError:
        return None
    if len(trees) != 1 or isinstance(trees[0], exp.Command):
        return None
    walk = _Walk(text)
    walk.statement(trees[0])
    walk.found.reads.sort(key=lambda ref: ref.start)
    return walk.found


_SYNONYMS = {"SYSTEM_VERSION": "VERSION", "SYSTEM_TIME": "TIMESTAMP"}


def _spelled(text: str) -> str:
    """``text`` with Spark's spellings sqlglot does not know as it knows them, right-aligned
    so that positions do not move: ``SYSTEM_VERSION AS OF`` / ``SYSTEM_TIME AS OF``, and the
    query ``TABLE t`` (``FROM t``)."""
    table = _TABLE_QUERY.match(text)
    if table is not None:
        text = text[: table.start(1)] + " FROM" + text[table.end(1) :]
    for token in tokens(text) if "SYSTEM_" in text.upper() else ():
        if token.upper in _SYNONYMS:
            word = _SYNONYMS[token.upper].rjust(len(token.text))
            text = text[: token.start] + word + text[token.end :]
    return text


_TABLE_QUERY = re.compile(r"\s*(TABLE)\s", re.IGNORECASE)


_CHANGES = {"TABLE_CHANGES": "name", "TABLE_CHANGES_BY_PATH": "path"}
_FILES = ("READ_FILES", "CLOUD_FILES")
_TARGETS = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create)


class _Walk:
    """One pass over a statement's tree, with the CTE names in scope at each node."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokens(text)
        self.at = {token.start: index for index, token in enumerate(self.toks)}
        self.found = References()
        self.target: exp.Table | None = None

    def statement(self, tree: exp.Expr) -> None:
        target = tree.this if isinstance(tree, _TARGETS) else None
        if isinstance(target, exp.Schema):  # INSERT INTO t (a, b) / CREATE TABLE t (a INT)
            target = target.this
        if isinstance(target, exp.Table) and isinstance(target.this, exp.Identifier):
            self.found.target = self.table(target)
            self.target = target
        self.node(tree, frozenset())

    def node(self, node: exp.Expr, ctes: frozenset[str]) -> None:
        if isinstance(node, exp.Hint):
            return  # /*+ BROADCAST(t) */ names an alias, inside a comment
        if isinstance(node, exp.Table) and node is not self.target:
            self.read(node, ctes)
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            ctes = self.ctes(with_, ctes)
        for child in node.iter_expressions():
            if child is not with_:
                self.node(child, ctes)

    def ctes(self, with_: exp.With, outer: frozenset[str]) -> frozenset[str]:
        """Walk each CTE's query with the names defined before it (and its own when
        ``RECURSIVE``); the names all CTEs add for the query after ``WITH``."""
        visible = set(outer)
        for cte in with_.expressions:
            name = cte.alias_or_name.lower()
            own = {name} if with_.args.get("recursive") else set()
            self.node(cte.this, frozenset(visible | own))
            visible.add(name)
        return frozenset(visible)

    def read(self, table: exp.Table, ctes: frozenset[str]) -> None:
        around = table.parent.parent if isinstance(table.parent, exp.Subquery) else table.parent
        stream = isinstance(around, exp.Stream)  # STREAM name / STREAM(name)
        if isinstance(table.this, exp.Identifier):
            if not table.args.get("db") and table.name.lower() in ctes:
                return  # the CTE, not a table
            self.found.reads.append(self.table(table, stream))
        elif isinstance(table.this, exp.Func) and _function_name(table.this) in _CHANGES:
            self.found.reads.append(self.changes(table.this))
        elif isinstance(table.this, exp.Func) and _function_name(table.this) in _FILES:
            self.found.files.append(self.files(table.this, stream))

    def table(self, table: exp.Table, stream: bool = False) -> TableRef:
        """The reference ``table`` is, measured in the text from its first name part."""
        parts = [p for p in (table.args.get(k) for k in ("catalog", "db", "this")) if p]
        start = min(_start(part) for part in parts)
        index = self.at.get(start)
        if index is None:
            raise SqlTextError(
                f"cannot place table {table.sql('spark')!r} in: {self.text.strip()[:200]}",
                fix="write the table's name plainly (no macros or parameters in its place)",
            )
        ref, after_name = name_at(self.text, self.toks, index)
        index = time_travel(self.text, self.toks, after_name, ref)
        if (table.args.get("version") is not None) != (index > after_name):
            raise SqlTextError(
                f"cannot read the time travel of {ref.describe()} in: {self.text.strip()[:200]}",
                fix="write VERSION AS OF <n> or TIMESTAMP AS OF <timestamp> after the table",
            )
        if stream:
            self.stream(ref, index)
        return ref

    def stream(self, ref: TableRef, after: int) -> None:
        """``ref`` is read as a stream: its span takes in ``STREAM`` (and the parentheses of
        ``STREAM(name)``), token ``after`` being the one after the name."""
        ref.stream = True
        ref.start = _stream_start(self.toks, self.at[ref.start])
        parenthesized = self.toks[self.at[ref.start] + 1].text == "("
        if parenthesized and after < len(self.toks) and self.toks[after].text == ")":
            ref.end = self.toks[after].end

    def changes(self, call: exp.Func) -> TableRef:
        """``table_changes('name', start[, end])`` / ``table_changes_by_path('/p', ...)``: its
        literal arguments, read from the text at the call's name (the n-th call of this
        function, counted apart from the other one's, as :meth:`files` counts)."""
        name = _function_name(call)
        heads = [t for t in self.toks if t.upper == name]
        taken = sum(
            1
            for r in self.found.reads
            if r.changes is not None and self.toks[self.at[r.start]].upper == name
        )
        head = heads[taken] if taken < len(heads) else None
        literals = [a for a in call.expressions if isinstance(a, exp.Literal)]
        if head is None or len(literals) != len(call.expressions) or not 2 <= len(literals) <= 3:
            raise SqlTextError(
                f"{name.lower()}(...) takes literals: a table, a start and an optional end",
                fix=f"e.g. {name.lower()}('events', 2, 5)",
            )
        index = self.at[head.start] + 2
        texts = [self.toks[index + 2 * k].text for k in range(len(literals))]
        end = self.toks[index + 2 * len(literals) - 1].end
        table = Token("string", texts[0], 0, 0, "").value
        if _CHANGES[name] == "path":
            return TableRef(head.start, end, path=table, changes=tuple(texts[1:]))
        return TableRef(head.start, end, name=table, changes=tuple(texts[1:]))

    def files(self, call: exp.Func, stream: bool) -> FilesRead:
        """A files read: its literal arguments from the tree, its span from the text (the
        call's name to its closing parenthesis, ``STREAM`` around it taken in)."""
        name = _function_name(call)
        heads = [t for t in self.toks if t.upper == name]
        taken = sum(1 for f in self.found.files if f.function == name)
        if taken >= len(heads):
            raise SqlTextError(f"cannot place {name.lower()}(...) in: {self.text.strip()[:200]}")
        index = self.at[heads[taken].start]
        close = _closing(self.toks, index + 1)
        args, named = _literal_arguments(call, name)
        ref = TableRef(self.toks[index].start, self.toks[close].end)
        if stream:
            self.stream(ref, close + 1)
        return FilesRead(ref.start, ref.end, name, args, named, stream)


def _closing(toks: list[Token], index: int) -> int:
    """The index of the parenthesis closing the one at ``index``."""
    depth = 0
    for at in range(index, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[at].text, 0)
        if depth == 0:
            return at
    raise SqlTextError("unbalanced parentheses in a files read")


def _literal_arguments(
    call: exp.Func, name: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Positional and named (``key => value``, or ``map('k', 'v', ...)``) literal arguments."""
    args: list[str] = []
    named: list[tuple[str, str]] = []
    for arg in call.expressions:
        if isinstance(arg, exp.Kwarg):
            named.append((arg.this.name, _literal(arg.expression, name)))
        elif isinstance(arg, exp.VarMap):
            keys, values = arg.args["keys"].expressions, arg.args["values"].expressions
            named.extend(
                (_literal(k, name), _literal(v, name)) for k, v in zip(keys, values, strict=True)
            )
        else:
            args.append(_literal(arg, name))
    return tuple(args), tuple(named)


def _literal(value: exp.Expr, function: str) -> str:
    if isinstance(value, exp.Boolean):
        return "true" if value.this else "false"
    if isinstance(value, exp.Literal):
        return str(value.this)
    raise SqlTextError(
        f"{function.lower()}(...) takes literal arguments; found {value.sql('spark')!r}",
        fix="write the path and options as literals, e.g. read_files('/landing', "
        "format => 'json', header => true)",
    )


def _function_name(call: exp.Func) -> str:
    return (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).upper()


def _start(part: exp.Expr) -> int:
    return int(part.meta.get("start", -1))


def _stream_start(toks: list[Token], index: int) -> int:
    """Where ``STREAM(name)`` / ``STREAM name`` begins, the name's token at ``index``."""
    back = index - 2 if index >= 2 and toks[index - 1].text == "(" else index - 1
    if back >= 0 and toks[back].upper == "STREAM":
        return toks[back].start
    return toks[index].start


# -- measuring a reference in the text ----------------------------------------------------------

_SUFFIX = re.compile(r"^(.*)@(?:v(\d+)|(\d{17}))$", re.DOTALL)


def split_time_travel(path: str) -> tuple[str, int | None, str | None]:
    """Delta's ``@v<n>`` / ``@<yyyyMMddHHmmssSSS>`` suffix of a path: (path, version, time)."""
    match = _SUFFIX.match(path)
    if match is None:
        return path, None, None
    if match.group(2) is not None:
        return match.group(1), int(match.group(2)), None
    stamp = dt.datetime.strptime(match.group(3), "%Y%m%d%H%M%S%f")
    return match.group(1), None, stamp.isoformat(sep=" ", timespec="milliseconds")


def name_at(text: str, toks: list[Token], index: int) -> tuple[TableRef, int]:
    """The table name (``a.b.`c```) or Delta path (``delta.`/p```, its ``@v<n>`` read) starting
    at token ``index``; with the index after it."""
    first = toks[index]
    if (
        first.upper == "DELTA"
        and index + 2 < len(toks)
        and toks[index + 1].text == "."
        and toks[index + 2].kind == "quoted"
    ):
        quoted = toks[index + 2]
        root, version, stamp = split_time_travel(quoted.value)
        ref = TableRef(first.start, quoted.end, path=root, version=version, timestamp=stamp)
        return ref, index + 3
    last = index
    while (
        last + 2 < len(toks)
        and toks[last + 1].text == "."
        and toks[last + 2].kind in ("word", "quoted")
    ):
        last += 2
    name = "".join(t.text for t in toks[index : last + 1])
    return TableRef(first.start, toks[last].end, name=name), last + 1


_TIME_TRAVEL = {"VERSION", "SYSTEM_VERSION", "TIMESTAMP", "SYSTEM_TIME"}


def time_travel(text: str, toks: list[Token], index: int, ref: TableRef) -> int:
    """``[FOR] VERSION|SYSTEM_VERSION AS OF n`` / ``[FOR] TIMESTAMP|SYSTEM_TIME AS OF ts`` at
    token ``index``, into ``ref`` (its span grows to the clause's end); the index after it."""
    ahead = index + (index < len(toks) and toks[index].upper == "FOR")
    words = [t.upper for t in toks[ahead : ahead + 3]]
    if len(words) < 3 or words[0] not in _TIME_TRAVEL or words[1:] != ["AS", "OF"]:
        return index
    at = ahead + 3
    value = toks[at] if at < len(toks) else None
    if value is None:
        raise SqlTextError(
            f"{words[0]} AS OF needs a value: {text.strip()[:200]}",
            fix="give e.g. VERSION AS OF 3 or TIMESTAMP AS OF '2024-01-31'",
        )
    if words[0] in ("VERSION", "SYSTEM_VERSION"):
        digits = value.value if value.kind in ("string", "number") else ""
        if not digits.isdigit():
            raise SqlTextError(
                f"VERSION AS OF takes a version number, not {value.text!r}",
                fix="give e.g. VERSION AS OF 3",
            )
        ref.version, ref.end = int(digits), value.end
        return at + 1
    following = toks[at + 1] if at + 1 < len(toks) else None
    if value.kind == "string" and _clause_ends(following):
        ref.timestamp, ref.end = value.value, value.end
        return at + 1
    end = _expression_end(toks, at)  # an expression: date_sub(current_date(), 1)
    ref.timestamp_expression = text[value.start : toks[end - 1].end]
    ref.end = toks[end - 1].end
    return end


CLAUSE_END = {
    "WHERE", "GROUP", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "MINUS", "JOIN", "ON",
    "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "NATURAL", "SEMI", "ANTI", "LATERAL", "WINDOW",
    "HAVING", "TABLESAMPLE", "PIVOT", "UNPIVOT", "USING", "SORT", "CLUSTER", "DISTRIBUTE",
    "QUALIFY", "SET", "WHEN", "VERSION", "TIMESTAMP", "FOR", "SELECT", "VALUES", "OFFSET",
    "AS", "FROM", "TABLE", "WITH", "OUTER", "PARTITION", "REPLACE", "BY", "INTO", "OVERWRITE",
}  # fmt: skip
"""Words that end a table reference's expression or alias (not an alias themselves)."""
_UNITS = {
    f"{unit}{plural}"
    for unit in ("YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND")
    for plural in ("", "S")
}


def _expression_end(toks: list[Token], first: int) -> int:
    """The index after an expression starting at ``first``: it ends at a clause keyword, a
    comma, a closing parenthesis, or an alias (a name right after an operand at the top level:
    ``date_sub(current_date(), 1) e``)."""
    depth, at, operand = 0, first, False
    while at < len(toks) and toks[at].text != ";":
        token = toks[at]
        if depth == 0:
            is_name = token.kind in ("word", "quoted") and token.upper not in _UNITS
            if token.upper in CLAUSE_END or token.text == "," or (operand and is_name):
                break
            ends = token.kind in ("number", "string") or token.text == ")"
            operand = ends or is_name or token.upper in _UNITS
        depth += (token.text == "(") - (token.text == ")")
        if depth < 0:
            break
        operand = operand or (depth == 0 and token.text == ")")
        at += 1
    return at


def _clause_ends(token: Token | None) -> bool:
    """Whether ``token`` cannot continue an expression (an alias, a keyword, the end)."""
    return token is None or token.kind in ("word", "quoted") or token.text in (",", ")", ";")
