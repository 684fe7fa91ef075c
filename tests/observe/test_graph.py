"""Layered layout of pipeline graphs."""

from __future__ import annotations

from lakefeed.observe.graph import NODE_HEIGHT, layout, source_label, with_sources


def positions(graph):
    return {n["name"]: (n["layer"], n["y"]) for n in layout(graph)["nodes"]}


def test_layers_follow_dependencies():
    graph = {
        "nodes": [
            {"name": "gold", "kind": "flow"},
            {"name": "kafka", "kind": "source"},
            {"name": "bronze", "kind": "flow"},
            {"name": "devices", "kind": "table"},
            {"name": "silver", "kind": "flow"},
        ],
        "edges": [
            ["kafka", "bronze"],
            ["bronze", "silver"],
            ["devices", "silver"],
            ["silver", "gold"],
            ["bronze", "gold"],
        ],
    }
    pos = positions(graph)
    assert {name: layer for name, (layer, _) in pos.items()} == {
        "kafka": 0,
        "devices": 0,
        "bronze": 1,
        "silver": 2,
        "gold": 3,
    }
    drawing = layout(graph)
    assert drawing["width"] > 0 and drawing["height"] >= 2 * NODE_HEIGHT
    assert drawing["edges"][0] == ["kafka", "bronze"]


def test_barycenter_uncrosses_parallel_chains():
    graph = {
        "nodes": [{"name": n} for n in ("a", "b", "a2", "b2")],
        "edges": [["a", "b2"], ["b", "a2"]],
    }
    pos = positions(graph)
    # a2 hangs off b and b2 off a: each sits at its parent's height, so the edges do not cross
    assert (pos["a"][1] < pos["b"][1]) == (pos["b2"][1] < pos["a2"][1])


def test_nodes_only_named_in_edges_and_cycles_are_laid_out():
    drawing = layout({"nodes": [], "edges": [["x", "y"], ["y", "x"], ["y", "z"]]})
    names = {n["name"]: n for n in drawing["nodes"]}
    assert set(names) == {"x", "y", "z"}
    assert names["x"]["kind"] == "unknown"
    assert layout({})["nodes"] == [] and layout({})["width"] == 0


def test_root_flows_get_their_sources_from_progress():
    graph = {
        "nodes": [{"name": "bronze", "kind": "table"}, {"name": "silver", "kind": "table"}],
        "edges": [["bronze", "silver"]],
    }
    sources = {"bronze": ["KafkaV2[Subscribe[orders]]"], "silver": ["lakefeed_delta[bronze]"]}
    full = with_sources(graph, sources)
    (source,) = [n for n in full["nodes"] if n["kind"] == "source"]
    assert source["name"] == "KafkaV2[Subscribe[orders]]"
    assert full["edges"] == [["bronze", "silver"], ["KafkaV2[Subscribe[orders]]", "bronze"]]
    assert graph["edges"] == [["bronze", "silver"]]  # input untouched
    pos = positions(full)
    assert pos["KafkaV2[Subscribe[orders]]"][0] == 0 and pos["silver"][0] == 2


def test_source_labels_drop_java_object_names():
    python = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@132c3e62"
    assert source_label(python) == "Python data source"
    assert source_label("KafkaV2[Subscribe[orders]]") == "KafkaV2[Subscribe[orders]]"
    assert source_label("org.example.MySource@ff") == "MySource"
    assert len(source_label("FileStreamSource[" + "x" * 80 + "]")) == 40
