"""The cursor of lakefeed's hand grammars: tokens with a position, keywords read one by one and
expression text cut at the keywords that end it outside quotes and brackets.

What neither Spark's parser nor sqlglot knows is read with it, over the one tokenizer
(:mod:`lakefeed.sql.tokens`): a table's column list (:mod:`lakefeed.sql.ddl`) and Delta's
utility statements (:mod:`lakefeed.compat.delta_spark.sql.parse`, whose cursor raises Delta's
SQL error instead of :class:`~lakefeed.sql.references.SqlTextError`).
"""

from __future__ import annotations

from typing import NoReturn

from lakefeed.core.errors import LakefeedError
from lakefeed.sql.references import SqlTextError
from lakefeed.sql.tokens import Token

_CHECK_FIX = "check the statement against Delta's SQL reference (docs.delta.io)"


def _opens(token: Token, before: Token | None) -> bool:
    """Whether ``token`` opens a nesting: a bracket, or ``<`` after ``MAP``/``ARRAY``/``STRUCT``."""
    if token.text != "<":
        return True
    return before is not None and before.upper in ("MAP", "ARRAY", "STRUCT")


def unquote(name: str) -> str:
    """A name as written, its backquotes taken off."""
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") and name.endswith("`") else name


class Cursor:
    """Tokens with a position; helpers that read keywords and cut expression text."""

    error: type[LakefeedError] = SqlTextError
    """What the cursor's refusals raise (a grammar's own error class in a subclass)."""

    def __init__(self, text: str, toks: list[Token]) -> None:
        self.text = text
        self.toks = toks
        self.i = 0

    def peek(self, ahead: int = 0) -> Token | None:
        at = self.i + ahead
        return self.toks[at] if 0 <= at < len(self.toks) else None

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
            raise self.error(
                f"expected {' '.join(words)} but found {found} in: {self.text.strip()[:200]}",
                fix=_CHECK_FIX,
            )

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.error(
                f"the statement ends too early: {self.text.strip()[:200]}", fix=_CHECK_FIX
            )
        self.i += 1
        return token

    def done(self) -> bool:
        token = self.peek()
        return token is None or token.text == ";"

    def span_until(self, stops: set[str], opening: str = "([{") -> tuple[int, int]:
        """From here to the first top-level keyword of ``stops`` (or the end): a char span.
        ``opening``: the brackets that nest (``<`` too in a column list: ``MAP<K, V>`` — only
        after a complex type's name, so ``a > 0`` in an expression stays a comparison)."""
        first = self.i
        pairs = dict(zip("([{<", ")]}>", strict=True))
        open_: list[str] = []  # the closing bracket each open one waits for
        while not self.done():
            token = self.toks[self.i]
            if not open_ and (token.upper or token.text) in stops and self.i > first:
                break
            if token.kind == "op" and token.text in opening and _opens(token, self.peek(-1)):
                open_.append(pairs[token.text])
            elif token.kind == "op" and open_ and token.text == open_[-1]:
                open_.pop()
            elif token.kind == "op" and token.text in ")]}" and not open_:
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
        return [unquote(item) for item in self.parenthesized()]

    def unexpected(self, statement: str, grammar: str) -> NoReturn:
        """Refuse the next token: not part of ``statement`` as lakefeed reads it."""
        token = self.next()
        raise self.error(
            f"{statement}: lakefeed does not know {token.text!r} here",
            fix=f"write it as Delta documents it: {grammar}",
        )

    def string(self) -> str:
        token = self.next()
        if token.kind != "string":
            raise self.error(
                f"expected a quoted string but found {token.text!r}",
                fix="quote the value: 'text'",
            )
        return token.value

    def integer(self) -> int:
        token = self.next()
        if token.kind != "number" or not token.text.isdigit():
            raise self.error(f"expected a whole number but found {token.text!r}", fix="give e.g. 3")
        return int(token.text)
