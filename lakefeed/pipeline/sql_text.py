"""Scanning SQL text outside its quotes: the one place pipeline SQL and AUTO CDC clauses learn
where parentheses close and which positions are at the top level."""

from __future__ import annotations

from collections.abc import Iterator


def scan(text: str) -> Iterator[tuple[int, str, int, bool]]:
    """Per character of ``text``: its index, itself, the parenthesis depth after it, and
    whether a quote (``'``, ``"`` or a backtick) is still open after it."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        yield i, ch, depth, bool(quote)


def matching_paren(text: str) -> int:
    """Index of the ``)`` closing the parenthesis ``text`` opens, -1 when none does."""
    for i, ch, depth, quoted in scan(text):
        if ch == ")" and depth == 0 and not quoted:
            return i
    return -1


def top_level(text: str, at: int) -> bool:
    """Whether position ``at`` is outside quotes and parentheses."""
    after = (0, False)  # (depth, quote open) after the last character before ``at``
    for _, _, depth, quoted in scan(text[:at]):
        after = (depth, quoted)
    return after == (0, False)
