"""The analysed plan as Spark prints it, read back into a tree, for sessions without Py4J.

Under Spark Connect the client holds no analysed plan object, but ``explain(extended=True)``
returns the server's ``== Analyzed Logical Plan ==`` text. Each node's line there is its
``simpleString`` (streaming nodes marked ``~``), indented three characters per level, so the
facts :func:`lakefeed.runtime.evaluate.plan_facts` reads over Py4J can be read from the text,
with the same stateful-operator strings: a checkpoint's guard identity
(:mod:`lakefeed.pipeline.guard`) does not change when a pipeline moves to Spark Connect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION = "== Analyzed Logical Plan =="
_PREFIX = re.compile(r"^[ :|+\-]*")
_NAME = re.compile(r"~?(\w+)")


@dataclass
class PlanNode:
    """One node of a printed plan: its line (``simpleString``), name and children."""

    text: str
    children: list[PlanNode] = field(default_factory=list)

    @property
    def name(self) -> str:
        match = _NAME.match(self.text)
        return match.group(1) if match else self.text

    @property
    def streaming(self) -> bool:
        return self.text.startswith("~")

    def walk(self) -> list[PlanNode]:
        """This node and every node below it, parents first (as ``_walk`` visits them)."""
        return [self, *(n for child in self.children for n in child.walk())]


def analyzed_tree(explain: str) -> PlanNode:
    """The root of the analysed plan in ``explain(extended=True)`` output."""
    lines = explain.split(_SECTION, 1)[1].split("\n== ", 1)[0].strip("\n").splitlines()
    lines = lines[1:]  # the first line is the output schema
    root = PlanNode(lines[0])
    path = [root]  # path[d]: the newest node at depth d
    for line in lines[1:]:
        start = _PREFIX.match(line).end()  # type: ignore[union-attr]
        depth = start // 3
        if depth < 1 or depth > len(path):  # a continuation of the line above
            path[-1].text += "\n" + line
            continue
        node = PlanNode(line[start:])
        path[depth - 1].children.append(node)
        del path[depth:]
        path.append(node)
    return root


def bracket_items(text: str) -> list[str]:
    """The items of the first ``[...]`` list in ``text``, split at top-level commas."""
    begin = text.find("[")
    if begin < 0:
        return []
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text[begin + 1 :]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    items.append("".join(current).strip())
    return [item for item in items if item]


def key_definitions(node: PlanNode) -> list[str]:
    """The aliases of the Project below an Aggregate that define its grouping keys."""
    if node.name != "Aggregate" or not node.children or node.children[0].name != "Project":
        return []
    keys = set(bracket_items(node.text))
    return [
        item
        for item in bracket_items(node.children[0].text)
        if " AS " in item and item.rsplit(" AS ", 1)[1] in keys
    ]
