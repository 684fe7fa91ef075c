"""Spark-free core of pipelines: graph, SQL files, expectations, output modes, guard, loader."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from lakefeed import load_pipeline
from lakefeed.core.errors import DataLossRiskError
from lakefeed.core.flow_context import current_flow, flow_context
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import Pipeline, loading
from lakefeed.pipeline.expectations import Action, Expectation, rule_counts
from lakefeed.pipeline.graph import Graph, Node, PipelineError
from lakefeed.pipeline.output_modes import PlanFacts, choose_output_mode
from lakefeed.pipeline.sql import parse_sql

# -- graph


def test_graph_orders_readers_after_what_they_read() -> None:
    graph = Graph.of(
        [
            Node("gold", "table", ("silver",)),
            Node("silver", "table", ("bronze",)),
            Node("bronze", "table"),
        ]
    )
    assert graph.order() == ["bronze", "silver", "gold"]
    assert graph.edges == [("silver", "gold"), ("bronze", "silver")]
    assert graph.downstream("bronze") == ["silver", "gold"]
    assert graph.as_event()["nodes"][0] == {"name": "gold", "kind": "table"}


def test_graph_reports_unknown_reference_with_suggestion_and_cycles() -> None:
    graph = Graph.of(
        [
            Node("a", "table", ("b",)),
            Node("b", "table", ("a",)),
            Node("c", "table", ("silvr",)),
            Node("silver", "table"),
        ]
    )
    problems = graph.problems()
    assert any("'c' reads 'silvr'" in p and "did you mean 'silver'" in p for p in problems)
    assert any(p.startswith("cycle: a reads b reads a") for p in problems)
    with pytest.raises(PipelineError) as error:
        graph.order()
    assert len(error.value.problems) == 2


# -- SQL files


def test_sql_file_parses_kinds_constraints_and_reads() -> None:
    flows = parse_sql(
        textwrap.dedent(
            """
            -- a comment; with a semicolon
            CREATE OR REFRESH STREAMING TABLE silver (
              CONSTRAINT temp_ok EXPECT (temperature BETWEEN -60 AND 150) ON VIOLATION DROP ROW,
              CONSTRAINT has_device EXPECT (device_id IS NOT NULL),
              CONSTRAINT sane EXPECT (coalesce(a, (b)) > 0) ON VIOLATION FAIL UPDATE
            ) PARTITIONED BY (date) COMMENT 'it''s silver'
            AS SELECT * FROM STREAM(LIVE.bronze) b JOIN dims d ON b.k = d.k;
            CREATE MATERIALIZED VIEW gold AS SELECT count(*) AS n FROM silver, range(3);
            CREATE TEMPORARY VIEW v AS WITH x AS (SELECT 1) SELECT * FROM x;
            """
        )
    )
    silver, gold, v = flows
    assert (silver.name, silver.kind, gold.kind, v.kind) == (
        "silver",
        "table",
        "materialized_view",
        "view",
    )
    assert silver.expectations == [
        Expectation("temp_ok", "temperature BETWEEN -60 AND 150", Action.DROP),
        Expectation("has_device", "device_id IS NOT NULL", Action.WARN),
        Expectation("sane", "coalesce(a, (b)) > 0", Action.FAIL),
    ]
    assert silver.partition_cols == ["date"] and silver.comment == "it's silver"
    assert (silver.stream_reads, silver.batch_reads) == (["bronze"], ["dims"])
    assert gold.batch_reads == ["silver"] and v.batch_reads == []
    rendered = silver.render({("bronze", True): "__s", ("dims", False): "__d"})
    assert rendered == "SELECT * FROM __s b JOIN __d d ON b.k = d.k"


def test_sql_comma_joins_record_every_table() -> None:
    (flow,) = parse_sql(
        "CREATE STREAMING TABLE j AS SELECT a.x, b.y, c.z "
        "FROM STREAM(LIVE.events) a, LIVE.dims AS b, other c, range(3) "
        "WHERE a.k = b.k GROUP BY a.x, b.y"
    )
    assert (flow.stream_reads, flow.batch_reads) == (["events"], ["dims", "other"])
    views = {("events", True): "__e", ("dims", False): "__d", ("other", False): "__o"}
    assert flow.render(views) == (
        "SELECT a.x, b.y, c.z FROM __e a, __d AS b, __o c, range(3) "
        "WHERE a.k = b.k GROUP BY a.x, b.y"
    )


def test_bad_sql_statements_are_all_reported_with_the_fix() -> None:
    with pytest.raises(PipelineError) as error:
        parse_sql(
            "CREATE TABLE t AS SELECT 1;\n"
            "CREATE STREAMING TABLE s (id INT) AS SELECT 1;\n"
            "CREATE STREAMING TABLE u COMMENT 'x' SELECT 1",
            source="p.sql",
        )
    problems = error.value.problems
    assert len(problems) == 3
    assert "expected CREATE STREAMING TABLE" in problems[0]
    assert "CONSTRAINT name EXPECT" in problems[1]
    assert "expected AS <query>" in problems[2]
    assert all(p.startswith("p.sql") for p in problems)


# -- expectations, output modes


def test_rule_counts_from_observed_metrics() -> None:
    rules = [Expectation("a", "x > 0", Action.WARN), Expectation("b", "y > 0", Action.DROP)]
    counts = rule_counts(rules, {"rows": 10, "failed_0": 3, "failed_1": 1, "dropped": 1})
    assert counts == {
        "a": {"action": "warn", "passed": 7, "failed": 3},
        "b": {"action": "drop", "passed": 9, "failed": 1},
    }


@pytest.mark.parametrize(
    ("facts", "requested", "mode", "problem"),
    [
        (PlanFacts(True), None, "append", None),
        (PlanFacts(True, aggregate=True, watermark=True), None, "append", None),
        (PlanFacts(True, aggregate=True), None, "complete", None),
        (PlanFacts(True, aggregate=True), "append", None, "needs a watermark"),
        (PlanFacts(True), "update", None, "cannot write a Delta table"),
        (PlanFacts(True), "complete", None, "needs an aggregation"),
        (PlanFacts(False), None, None, "returned a batch DataFrame"),
    ],
)
def test_output_mode_choice(
    facts: PlanFacts, requested: str | None, mode: str | None, problem: str | None
) -> None:
    choice = choose_output_mode("t", "table", facts, requested)
    assert choice.mode == mode
    if problem:
        assert problem in choice.problems[0]
    else:
        assert not choice.problems


def test_complete_mode_fallback_warns_and_views_must_be_batch() -> None:
    choice = choose_output_mode("t", "table", PlanFacts(True, aggregate=True), None)
    assert "complete mode" in choice.warnings[0]
    mv = choose_output_mode("m", "materialized_view", PlanFacts(True), None)
    assert mv.mode is None and "lf.read" in mv.problems[0]


# -- checkpoint guard


def _checkpoint(path: Path, batches: int = 1) -> Path:
    (path / "offsets").mkdir(parents=True)
    for i in range(batches):
        (path / "offsets" / str(i)).write_text("v1")
    return path


def test_guard_accepts_fresh_and_own_checkpoints(tmp_path: Path) -> None:
    me = guard.Identity("p", "silver", "silver", ["Deduplicate [k]"])
    guard.check(tmp_path / "fresh", me, target_has_rows=False)
    checkpoint = _checkpoint(tmp_path / "cp")
    guard.write_identity(checkpoint, me)
    guard.check(checkpoint, me, target_has_rows=True)
    saved = json.loads((checkpoint / guard.IDENTITY_FILE).read_text())
    assert saved["flow"] == "silver" and saved["fingerprint"] == me.fingerprint


def test_guard_refuses_other_flows_checkpoint(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp")
    guard.write_identity(checkpoint, guard.Identity("p", "bronze", "bronze"))
    with pytest.raises(guard.GuardError, match="belongs to flow 'bronze'.*--full-refresh silver"):
        guard.check(checkpoint, guard.Identity("p", "silver", "silver"), target_has_rows=False)


def test_guard_refuses_missing_checkpoint_beside_rows(tmp_path: Path) -> None:
    me = guard.Identity("p", "silver", "silver")
    with pytest.raises(guard.GuardError, match="has rows but its checkpoint.*is missing"):
        guard.check(tmp_path / "none", me, target_has_rows=True)
    guard.check(tmp_path / "none", me, target_has_rows=True, full_refresh=True)


def test_guard_refuses_a_sink_flow_without_its_checkpoint(tmp_path: Path) -> None:
    sink = tmp_path / "export"
    guard.record_flow(sink, "to_export")
    guard.record_flow(sink, "other")
    assert guard.flows_started(sink) == ["to_export", "other"]
    me = guard.Identity("p", "to_export", "export")
    with pytest.raises(guard.GuardError) as refused:
        guard.check(tmp_path / "none", me, target_has_rows=True, sink=True)
    assert refused.value.code == "CHECKPOINT_MISSING" and "sink 'export'" in str(refused.value)
    assert "empty the sink" in str(refused.value.fix)
    guard.forget_flows(sink, ["to_export"])  # a full refresh of the sink: starting over is meant
    assert guard.flows_started(sink) == ["other"]


def test_guard_refuses_changed_state_and_foreign_checkpoints(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp")
    guard.write_identity(checkpoint, guard.Identity("p", "gold", "gold", ["Aggregate [k]"]))
    changed = guard.Identity("p", "gold", "gold", ["Aggregate [k, j]"])
    with pytest.raises(guard.GuardError, match="stateful operators changed.*full-refresh gold"):
        guard.check(checkpoint, changed, target_has_rows=True)
    foreign = _checkpoint(tmp_path / "foreign")
    with pytest.raises(guard.GuardError, match="not created by lakefeed"):
        guard.check(foreign, changed, target_has_rows=False)


def _commits(path: Path, count: int, app_id: str | None = None) -> None:
    """``count`` Delta commits of one row each, batch ``i`` carrying txn(app_id, i)."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    for i in range(count):
        txn = CommitProperties(app_transactions=[Transaction(app_id, i)]) if app_id else None
        write_deltalake(str(path), pa.table({"x": [i]}), mode="append", commit_properties=txn)


def _stream_checkpoint(path: Path, batches: int, source_offset: dict) -> Path:
    """What Spark leaves: the query id, one commit per batch, and the last batch's offsets."""
    for folder in ("offsets", "commits"):
        (path / folder).mkdir(parents=True)
    (path / "metadata").write_text('{"id":"query-1"}')
    for i in range(batches):
        (path / "commits" / str(i)).write_text("v1\n{}")
    last = path / "offsets" / str(batches - 1)
    last.write_text("\n".join(["v1", "{}", json.dumps(source_offset), "-"]))
    return path


def test_version_guard_finds_tables_behind_checkpoints(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from lakefeed.connectors.delta.offsets import DeltaOffset

    source, target = tmp_path / "external", tmp_path / "silver"
    _commits(source, 3)  # versions 0..2
    _commits(target, 2, app_id="query-1")  # batches 0 and 1
    source_id = str(DeltaTable(str(source)).metadata().id)
    read_all = DeltaOffset(3, -1, False).to_dict(source_id)  # read up to version 2
    flow = guard.Flow("silver", _stream_checkpoint(tmp_path / "cp", 2, read_all), ("silver",))
    tables = {"silver": target, str(source): source}
    assert guard.tables_behind([flow], tables) == []
    guard.check_versions([flow], tables, [])
    # Rebuilding the source alone would leave the flow's offsets past the new table.
    with pytest.raises(DataLossRiskError, match="flow.s. silver have read") as reset:
        guard.check_versions([flow], tables, [str(source)])
    assert reset.value.code == "SOURCE_RESET" and f"{source},silver`" in str(reset.value.fix)

    (source / "_delta_log" / f"{2:020d}.json").unlink()
    (target / "_delta_log" / f"{1:020d}.json").unlink()
    behind = guard.tables_behind([flow], tables)
    assert [(b.table, b.flow) for b in behind] == [("silver", "silver"), (str(source), "silver")]
    assert "is at version 0 and holds batches up to 0 of flow 'silver'" in behind[0].reason
    assert "has read table" in behind[1].reason and "up to version 2" in behind[1].reason
    with pytest.raises(DataLossRiskError, match="--full-refresh silver`") as refused:
        guard.check_versions([flow], tables, [])
    assert refused.value.code == "TABLE_BEHIND"
    guard.check_versions([flow], tables, ["silver"])  # its checkpoint goes with the refresh


def test_a_batch_that_changed_nothing_still_records_its_txn(tmp_path: Path) -> None:
    """A MERGE of stale changes commits nothing in delta-rs: ``record_txn`` leaves the batch's
    txn in an empty commit, so the guard does not take the table for one whose log went back."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction

    from lakefeed.delta import commit

    target = tmp_path / "silver"
    _commits(target, 1, app_id="query-1")  # batch 0
    flow = guard.Flow("silver", _stream_checkpoint(tmp_path / "cp", 2, {}), ("silver",))
    table = DeltaTable(str(target))
    properties = CommitProperties(app_transactions=[Transaction("query-1", 1)])
    stale = pa.table({"x": pa.array([], pa.int64())})
    merge = table.merge(
        stale, "t.x = s.x", source_alias="s", target_alias="t", commit_properties=properties
    )
    merge.when_matched_update_all().execute()
    assert table.version() == 0  # delta-rs wrote nothing, not even the txn
    assert "holds batches up to 0" in guard.tables_behind([flow], {"silver": target})[0].reason
    commit.record_txn(table, properties)
    assert DeltaTable(str(target)).transaction_version("query-1") == 1
    assert guard.tables_behind([flow], {"silver": target}) == []


def test_version_guard_finds_a_checkpoint_behind_its_table(tmp_path: Path) -> None:
    """The table holds batches 0-2; a checkpoint that committed batch 1 may be replaying
    batch 2 (told apart at write time), one that committed only batch 0 went back."""
    target = tmp_path / "silver"
    _commits(target, 3, app_id="query-1")
    replaying = guard.Flow("silver", _stream_checkpoint(tmp_path / "cp2", 2, {}), ("silver",))
    guard.check_versions([replaying], {"silver": target}, [])
    restored = guard.Flow("silver", _stream_checkpoint(tmp_path / "cp1", 1, {}), ("silver",))
    with pytest.raises(DataLossRiskError) as refused:
        guard.check_versions([restored], {"silver": target}, [])
    assert refused.value.code == "CHECKPOINT_BEHIND_TABLE"
    assert "holds batches up to 2" in str(refused.value)
    assert "table version 0 goes with the checkpoint" in str(refused.value)
    assert "--full-refresh silver`" in str(refused.value.fix)


# -- decorators, loader, context


def test_decorators_collect_datasets_and_rules_in_order(tmp_path: Path) -> None:
    file = tmp_path / "p.py"
    file.write_text(
        textwrap.dedent(
            """
            import lakefeed as lf

            @lf.expect("above", "x > 0")
            @lf.table(comment="c", partition_cols=["d"])
            @lf.expect_or_drop("first", "x IS NOT NULL")
            @lf.expect_all_or_fail({"second": "x < 9", "third": "x <> 5"})
            def t():
                return lf.read_stream("v")

            @lf.view
            def v():
                return lf.source("iot", rowsPerSecond=5)

            @lf.materialized_view(name="renamed")
            def mv():
                return lf.read("t")
            """
        )
    )
    (tmp_path / "q.sql").write_text("CREATE STREAMING TABLE s AS SELECT * FROM STREAM(t)")
    pipeline = load_pipeline([tmp_path])
    assert pipeline.name == tmp_path.name
    assert list(pipeline.datasets) == ["t", "v", "renamed", "s"]
    t = pipeline.datasets["t"]
    assert [r.name for r in t.expectations] == ["above", "first", "second", "third"]
    assert t.quarantine == "t_quarantine" and t.partition_cols == ["d"]
    assert pipeline.datasets["s"].sql is not None


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "import lakefeed as lf\n\n@lf.table\ndef a():\n    pass\n\n"
            "@lf.table(name='a')\ndef b():\n    pass\n",
            "defined twice",
        ),
        ("x = 1 +\n", "SyntaxError"),
        ("import nosuchmodule_xyz\n", "ModuleNotFoundError"),
        (
            "import lakefeed as lf\n\n@lf.table(output_mode='upsert')\ndef a():\n    pass\n",
            "output_mode must be",
        ),
        ("x = 1\n", "declare no dataset"),
    ],
)
def test_bad_pipeline_files_give_clear_errors(tmp_path: Path, source: str, message: str) -> None:
    file = tmp_path / "bad.py"
    file.write_text(source)
    with pytest.raises(PipelineError) as error:
        load_pipeline([file])
    assert message in str(error.value)
    assert "bad.py" in str(error.value) or "declare no dataset" in message


def test_missing_file_and_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="no such file"):
        load_pipeline([tmp_path / "nope.py"])
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(PipelineError, match=r"must end in \.py or \.sql"):
        load_pipeline([tmp_path / "x.txt"])


def test_flow_context_is_set_only_while_evaluating(tmp_path: Path) -> None:
    from lakefeed.core.lakehouse import Lakehouse

    assert current_flow() is None
    with flow_context("bronze", Lakehouse.at(tmp_path)) as ctx:
        assert current_flow() == ctx
        assert ctx.schema_path.endswith("schemas/bronze")
    assert current_flow() is None


def test_reading_outside_a_run_says_how_to_run() -> None:
    import lakefeed as lf

    with pytest.raises(RuntimeError, match="lakefeed run"):
        lf.read_stream("x")
    with loading(Pipeline("p")) as pipeline:
        lf.view(lambda: None, name="x")
    assert "x" in pipeline.datasets
