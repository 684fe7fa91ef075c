"""The flow graph: which dataset reads which, in what order they run, and what is wrong.

Pure Python so ``lakefeed validate`` can explain a broken pipeline in milliseconds and the rules
are unit-tested without Spark. Edges point from the dataset read to the dataset reading it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lakefeed.pipeline.errors import PipelineError


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # "table" | "materialized_view" | "view"
    reads: tuple[str, ...] = ()


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Graph:
        return cls({node.name: node for node in nodes})

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(src, node.name) for node in self.nodes.values() for src in node.reads]

    def problems(self) -> list[str]:
        """Unknown references and cycles, each phrased with what to do."""
        found = []
        for node in self.nodes.values():
            for src in node.reads:
                if src not in self.nodes:
                    found.append(
                        f"{node.name!r} reads {src!r}, which no flow in this pipeline defines: "
                        f"define it with @lf.table/@lf.view or fix the name"
                        + _suggest(src, self.nodes)
                    )
        for cycle in self._cycles():
            found.append(
                "cycle: " + " reads ".join(cycle) + ": a dataset cannot depend on itself; "
                "break the loop (e.g. read a source instead of a downstream table)"
            )
        return found

    def check(self) -> None:
        problems = self.problems()
        if problems:
            raise PipelineError(problems)

    def order(self) -> list[str]:
        """Topological order (readers after what they read), ties broken by name."""
        self.check()
        indegree = {name: 0 for name in self.nodes}
        readers: dict[str, list[str]] = {name: [] for name in self.nodes}
        for src, dst in self.edges:
            indegree[dst] += 1
            readers[src].append(dst)
        ready = sorted(name for name, degree in indegree.items() if degree == 0)
        ordered: list[str] = []
        while ready:
            name = ready.pop(0)
            ordered.append(name)
            for reader in readers[name]:
                indegree[reader] -= 1
                if indegree[reader] == 0:
                    ready.append(reader)
            ready.sort()
        return ordered

    def downstream(self, name: str) -> list[str]:
        """Every dataset that reads ``name`` directly or transitively."""
        seen: list[str] = []
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for src, dst in self.edges:
                if src == current and dst not in seen:
                    seen.append(dst)
                    frontier.append(dst)
        return seen

    def as_event(self) -> dict:
        """The ``graph`` object of the ``run_start`` event."""
        return {
            "nodes": [{"name": n.name, "kind": n.kind} for n in self.nodes.values()],
            "edges": [list(edge) for edge in self.edges],
        }

    def _cycles(self) -> list[list[str]]:
        cycles: list[list[str]] = []
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        path: list[str] = []

        def visit(name: str) -> None:
            state[name] = 1
            path.append(name)
            for src in self.nodes[name].reads:
                if src not in self.nodes:
                    continue
                if state.get(src) == 1:
                    cycles.append(path[path.index(src) :] + [src])
                elif src not in state:
                    visit(src)
            path.pop()
            state[name] = 2

        for name in sorted(self.nodes):
            if name not in state:
                visit(name)
        return cycles


def _suggest(name: str, known: Mapping[str, Node]) -> str:

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
