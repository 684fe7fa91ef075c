"""Layered layout of a pipeline graph (sources → flows → tables), computed in Python.

Pipeline graphs are small DAGs (tens of nodes), so a longest-path layering with a couple of
barycenter sweeps to reduce crossings lays them out well; the browser only draws the boxes
and arrows as SVG. That saves shipping a general graph-layout library (dagre/ELK are hundreds
of kilobytes) and keeps the layout unit-testable.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

NODE_WIDTH = 170
NODE_HEIGHT = 46
GAP_X = 70
GAP_Y = 22
SWEEPS = 4


def _layers(names: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest path from a root; edges closing a cycle are ignored so bad input cannot hang."""
    parents: dict[str, list[str]] = defaultdict(list)
    for src, dst in edges:
        parents[dst].append(src)
    layer: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(name: str) -> int:
        if name in layer:
            return layer[name]
        visiting.add(name)
        ups = [depth(p) + 1 for p in parents[name] if p not in visiting]
        visiting.discard(name)
        layer[name] = max(ups, default=0)
        return layer[name]

    for name in names:
        depth(name)
    return layer


def _order(columns: list[list[str]], edges: list[tuple[str, str]]) -> None:
    """Reorder each column by the mean position of its neighbours (barycenter heuristic)."""
    ups: dict[str, list[str]] = defaultdict(list)
    downs: dict[str, list[str]] = defaultdict(list)
    for src, dst in edges:
        ups[dst].append(src)
        downs[src].append(dst)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        indices = range(1, len(columns)) if downward else range(len(columns) - 2, -1, -1)
        for i in indices:
            ref = columns[i - 1] if downward else columns[i + 1]
            columns[i] = _by_barycenter(columns[i], ref, ups if downward else downs)


def _by_barycenter(column: list[str], ref: list[str], links: dict[str, list[str]]) -> list[str]:
    pos = {name: k for k, name in enumerate(ref)}

    def key(item: tuple[int, str]) -> float:
        linked = [pos[n] for n in links[item[1]] if n in pos]
        return sum(linked) / len(linked) if linked else float(item[0])

    return [name for _, name in sorted(enumerate(column), key=key)]


_OBJECT_ID = re.compile(r"@[0-9a-f]+$")
_PACKAGE = re.compile(r"^(?:[a-z_][\w]*\.)+(?=[A-Z])")


def source_label(description: str) -> str:
    """A short node name from Spark's source description.

    ``KafkaV2[Subscribe[orders]]`` stays; a Java object name such as
    ``org.apache...python.PythonMicroBatchStreamWithTriggerAvailableNow@132c3e62`` (every Python
    data source) loses its package and identity hash, which changes with each restart. Names
    the runtime gave (``Connector.describe``) stay as they are.
    """
    label = _PACKAGE.sub("", _OBJECT_ID.sub("", description.strip()))
    if label.startswith("PythonMicroBatchStream"):
        label = "Python data source"
    return label if len(label) <= 40 else label[:39] + "…"


def with_sources(graph: dict[str, Any], sources: dict[str, list[str]]) -> dict[str, Any]:
    """The run's dataset graph plus the external sources its root flows read.

    The runtime's graph links datasets; what feeds the first ones is named by the runtime when a
    flow starts, by what it is ('Kafka topics orders', 'landing folder /in', 'IoT generator';
    see ``Connector.describe``), or else known only from Spark's progress
    (``sources[].description``). Flows fed by another node of the graph already show where their
    data comes from, so only roots get source nodes.
    """
    nodes = [dict(n) for n in graph.get("nodes") or []]
    edges = [list(e) for e in graph.get("edges") or []]
    fed = {dst for _, dst in edges}
    known = {n.get("name") for n in nodes}
    for flow, descriptions in sources.items():
        if flow in fed:
            continue
        for description in descriptions:
            name = source_label(description)
            if name not in known:
                nodes.append({"name": name, "kind": "source", "description": description})
                known.add(name)
            edges.append([name, flow])
    return {"nodes": nodes, "edges": edges}


def layout(graph: dict[str, Any]) -> dict[str, Any]:
    """Nodes with ``x``/``y`` (top-left corner), edges, and the drawing's width and height."""
    nodes = {str(n["name"]): dict(n) for n in graph.get("nodes") or [] if "name" in n}
    edges = [(str(src), str(dst)) for src, dst in graph.get("edges") or []]
    for src, dst in edges:
        for name in (src, dst):
            nodes.setdefault(name, {"name": name, "kind": "unknown"})
    names = list(nodes)
    layer = _layers(names, edges)
    columns: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for name in names:
        columns[layer[name]].append(name)
    _order(columns, edges)
    height = max((len(c) for c in columns), default=0)
    for i, column in enumerate(columns):
        offset = (height - len(column)) * (NODE_HEIGHT + GAP_Y) / 2
        for k, name in enumerate(column):
            nodes[name]["x"] = i * (NODE_WIDTH + GAP_X)
            nodes[name]["y"] = offset + k * (NODE_HEIGHT + GAP_Y)
            nodes[name]["layer"] = i
    return {
        "nodes": list(nodes.values()),
        "edges": [list(e) for e in edges],
        "node_width": NODE_WIDTH,
        "node_height": NODE_HEIGHT,
        "width": max(len(columns) * (NODE_WIDTH + GAP_X) - GAP_X, 0),
        "height": max(height * (NODE_HEIGHT + GAP_Y) - GAP_Y, 0),
    }
