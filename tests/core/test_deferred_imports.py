"""Imports sit at module top; one inside a function only defers a heavy import (pyspark,
pyarrow, delta-rs, a connector package, an optional extra) or keeps a load order, and a comment
on it or on the line above says which (issue 30: function-level imports had come to hold
package cycles together unseen by the layering contract)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside:
                found.append(child)
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(tree, False)
    return found


def _explained(node: ast.Import | ast.ImportFrom, lines: list[str]) -> bool:
    """A comment on the import's first or last line, or on a comment line above it and the
    imports between (one comment may speak for a block of deferred imports)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    if "#" in lines[first] or "#" in lines[last]:
        return True
    above = first - 1
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def unexplained(path: Path) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
        for node in _function_imports(ast.parse(text))
        if not _explained(node, lines)
    ]


def test_every_import_inside_a_function_says_why_it_is_deferred() -> None:
    found = [hit for path in sorted((ROOT / "lakefeed").rglob("*.py")) for hit in unexplained(path)]
    assert not found, (
        "move these imports to the module top, or say in a comment why each is deferred "
        "(a heavy package, a load order):\n" + "\n".join(found)
    )
