"""lakefeed's one SQL tokenizer: words, backquoted names, strings, numbers and operators with
their places in the text, comments and spaces skipped.

Every hand-read piece of SQL goes through it: a table's column list (:mod:`lakefeed.sql.ddl`),
Delta's utility statements (:mod:`lakefeed.compat.delta_spark.sql.parse`), the pipeline DDL wrappers
(:mod:`lakefeed.pipeline.sql`), AUTO CDC clauses (:mod:`lakefeed.cdc.sql`), statement splitting, and
the span of a table reference the parsers (:mod:`lakefeed.sql.references`) found. Quotes, comments
and parentheses are therefore understood the same way everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
   |(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
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


def _scan(text: str) -> Iterator[re.Match[str]]:
    """Every piece of ``text``, spaces and comments included (``lastgroup`` names its kind)."""
    return _TOKEN.finditer(text)


def tokens(text: str) -> list[Token]:
    """The tokens of ``text`` (comments and spaces dropped)."""
    found = []
    for match in _scan(text):
        kind = match.lastgroup or "op"
        if kind not in ("space", "comment"):
            word = match.group()
            upper = word.upper() if kind == "word" else ""
            found.append(Token(kind, word, match.start(), match.end(), upper))
    return found


def split_statements(text: str) -> list[tuple[int, str]]:
    """``text`` split at the ``;`` outside quotes and comments, comments dropped (their line
    breaks kept, so a line inside a statement is still the file's line); each statement with
    the line of the file it starts on."""
    statements: list[str] = []
    current: list[str] = []
    for match in _scan(text):
        piece = match.group()
        if match.lastgroup == "comment":
            current.append("\n" * piece.count("\n"))
        elif piece == ";":
            statements.append("".join(current))
            current = []
        else:
            current.append(piece)
    statements.append("".join(current))
    lines, found = 1, []
    for statement in statements:
        if statement.strip():
            lead = len(statement) - len(statement.lstrip())
            found.append((lines + statement.count("\n", 0, lead), statement.strip()))
        lines += statement.count("\n")
    return found


def matching_paren(text: str) -> int:
    """Index of the ``)`` closing the parenthesis ``text`` opens, -1 when none does."""
    depth = 0
    for token in tokens(text):
        if token.kind == "op":
            depth += (token.text == "(") - (token.text == ")")
            if depth == 0:
                return token.start if token.text == ")" else -1
    return -1


def top_level(text: str, at: int) -> bool:
    """Whether position ``at`` is outside quotes, comments and parentheses."""
    depth = 0
    for match in _scan(text):
        if match.end() > at:
            return depth == 0 and match.start() == at
        depth += (match.group() == "(") - (match.group() == ")")
    return depth == 0
