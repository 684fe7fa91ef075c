"""AUTO CDC declarations: misuse refused with codes before anything runs, SQL and SDP read as
lakefeed's API (Spark-free, except ``lakefeed validate`` at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.cdc.sql import parse_body
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.sql import parse_sql
from lakefeed.runtime.validate import validate
from tests.pipeline.support import load, write

HEADER = 'import lakefeed as lf\n\n@lf.view\ndef changes():\n    return lf.source("rate")\n\n'
FLOW = 'target="t", source="changes", keys=["id"], sequence_by="seq"'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            f'lf.create_streaming_table("t")\nlf.apply_changes({FLOW}, column_list=["a"], '
            'except_column_list=["b"])',
            "column_list or except_column_list, not both",
        ),
        (f'lf.create_streaming_table("t")\nlf.apply_changes({FLOW}, stored_as_scd_type=3)', "3"),
        (
            f'lf.create_streaming_table("t")\n'
            f'lf.apply_changes({FLOW}, track_history_column_list=["a"])',
            "track_history_* needs stored_as_scd_type=2",
        ),
        (
            'lf.create_streaming_table("t")\nlf.apply_changes(target="t", source="changes", '
            'keys=["id"], sequence_by="")',
            "sequence_by is missing",
        ),
        (  # a bare string would be read letter by letter as keys ['i', 'd']
            'lf.create_streaming_table("t")\nlf.apply_changes(target="t", source="changes", '
            'keys="id", sequence_by="seq")',
            "keys='id' is not a list",
        ),
        (
            'lf.create_streaming_table("t")\nlf.apply_changes(target="t", source="changes", '
            'keys=["id"], sequence_by=123)',
            "sequence_by=123 is a int, not SQL text or a Column",
        ),
        (
            f'lf.create_streaming_table("t")\nlf.apply_changes({FLOW}, apply_as_deletes=True)',
            "apply_as_deletes=True is a bool",
        ),
    ],
)
def test_misuse_is_refused_where_it_is_written(tmp_path: Path, text: str, problem: str) -> None:
    folder = write(tmp_path / "p", {"p.py": HEADER + text + "\n"})
    with pytest.raises(PipelineError) as error:
        load([folder])
    message = "\n".join(error.value.problems)
    assert problem in message and "[LAKEFEED:CDC_INVALID]" in message and "p.py:" in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"lf.apply_changes({FLOW})", "applies changes to 't', which is not declared"),
        (
            "@lf.materialized_view\ndef t():\n    return lf.read('changes')\n\n"
            f"lf.apply_changes({FLOW})",
            "has its own query (materialized view",
        ),
        (
            f'lf.create_streaming_table("t")\nlf.apply_changes({FLOW})\n'
            '@lf.append_flow(target="t")\ndef more():\n    return lf.read_stream("changes")',
            "both AUTO CDC and append flows",
        ),
    ],
)
def test_a_target_must_be_a_declared_streaming_table(
    tmp_path: Path, text: str, problem: str
) -> None:
    folder = write(tmp_path / "p", {"p.py": HEADER + text + "\n"})
    with pytest.raises(PipelineError) as error:
        load([folder])
    assert problem in "\n".join(error.value.problems)


def test_sql_spellings_read_as_the_python_arguments() -> None:
    body = (
        "FROM STREAM(LIVE.cdc) KEYS (id, region) IGNORE NULL UPDATES "
        "APPLY AS DELETE WHEN op = 'DELETE' AND note <> 'SEQUENCE BY x' "
        "APPLY AS TRUNCATE WHEN op = 'TRUNCATE' SEQUENCE BY struct(ts, id) "
        "COLUMNS * EXCEPT (op, note) STORED AS SCD TYPE 2 TRACK HISTORY ON (name, city)"
    )
    assert parse_body(body, "f.sql:1") == {
        "source": "cdc",
        "keys": ["id", "region"],
        "ignore_null_updates": True,
        "apply_as_deletes": "op = 'DELETE' AND note <> 'SEQUENCE BY x'",
        "apply_as_truncates": "op = 'TRUNCATE'",
        "sequence_by": "struct(ts, id)",
        "except_column_list": ["op", "note"],
        "stored_as_scd_type": "2",
        "track_history_column_list": ["name", "city"],
    }
    declared, flow = parse_sql(
        "CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM s KEYS (id) SEQUENCE BY ts;\n"
        "CREATE FLOW f AS AUTO CDC INTO t FROM STREAM s KEYS (id) SEQUENCE BY ts COLUMNS (id);",
        "f.sql",
    )
    assert declared.declared and declared.cdc == {
        "source": "s",
        "keys": ["id"],
        "sequence_by": "ts",
    }
    assert (flow.name, flow.flow_name, flow.cdc and flow.cdc["column_list"]) == ("t", "f", ["id"])
    with pytest.raises(PipelineError, match="missing SEQUENCE BY"):
        parse_sql("APPLY CHANGES INTO t FROM STREAM(s) KEYS (id)", "f.sql")


def test_once_flows_in_both_sql_spellings() -> None:
    """DLT's current ``AUTO CDC ONCE INTO`` / ``INSERT ONCE INTO`` and the older
    ``INSERT INTO ONCE``: one-off backfills; without ONCE, streaming flows."""
    flows = parse_sql(
        "CREATE FLOW a AS AUTO CDC ONCE INTO t FROM s KEYS (id) SEQUENCE BY ts;\n"
        "CREATE FLOW b AS AUTO CDC INTO t FROM STREAM(s) KEYS (id) SEQUENCE BY ts;\n"
        "CREATE FLOW c AS INSERT ONCE INTO u BY NAME SELECT * FROM s;\n"
        "CREATE FLOW d AS INSERT INTO ONCE u BY NAME SELECT * FROM s;\n"
        "CREATE FLOW e AS INSERT INTO u BY NAME SELECT * FROM STREAM(s);",
        "f.sql",
    )
    assert [(f.flow_name, f.name, f.once) for f in flows] == [
        ("a", "t", True),
        ("b", "t", False),
        ("c", "u", True),
        ("d", "u", True),
        ("e", "u", False),
    ]


def test_sdp_create_auto_cdc_flow_declares_the_same_flow(tmp_path: Path) -> None:
    text = (
        "from pyspark import pipelines as dp\n\n"
        'dp.create_streaming_table("t")\n'
        'dp.create_auto_cdc_flow(target="t", source="changes", keys=["id"], sequence_by="seq",'
        ' apply_as_deletes="op = \'DELETE\'", except_column_list=["op"], stored_as_scd_type=2)\n'
    )
    folder = write(tmp_path / "p", {"a.py": HEADER, "b.py": text})
    flow = load([folder]).append_flows["t_cdc"]
    assert flow.cdc is not None and flow.target == "t"
    assert (flow.cdc.keys, flow.cdc.sequence_by, flow.cdc.apply_as_deletes) == (
        ["id"],
        "seq",
        "op = 'DELETE'",
    )
    assert (flow.cdc.except_column_list, flow.cdc.scd_type) == (["op"], 2)


def test_sdp_create_auto_cdc_flow_takes_the_users_columns(spark, tmp_path: Path) -> None:
    """``col()``/``expr()`` built at module level on lakefeed's (classic) session: names and
    conditions as written, not the Columns' ``Column<'seq'>`` text."""
    text = (
        "from pyspark import pipelines as dp\nfrom pyspark.sql.functions import col, expr\n\n"
        'dp.create_streaming_table("t")\n'
        'dp.create_auto_cdc_flow(target="t", source="changes", keys=[col("id")],'
        ' sequence_by=col("seq"), apply_as_deletes=expr("op = \'DELETE\'"),'
        ' except_column_list=[col("op")])\n'
    )
    folder = write(tmp_path / "p", {"a.py": HEADER, "b.py": text})
    cdc = load([folder]).append_flows["t_cdc"].cdc
    assert cdc is not None and (cdc.keys, cdc.except_column_list) == (["id"], ["op"])
    changes = spark.createDataFrame([(1, 2, "DELETE")], "id INT, seq INT, op STRING")
    assert changes.select(cdc.sequence_by, cdc.apply_as_deletes).first() == (2, True)


def test_validate_refuses_names_the_source_does_not_have(spark, tmp_path: Path) -> None:
    text = (
        'lf.create_streaming_table("t")\n'
        'lf.apply_changes(target="t", source="changes", keys=["nope"], sequence_by="ts + 1",'
        ' apply_as_deletes="value", column_list=["nope", "value"])\n'
    )
    folder = write(tmp_path / "p", {"p.py": HEADER + text})
    result = validate(load([folder]), Lakehouse.at(tmp_path / "lh"), spark)
    problems = "\n".join(result.problems)
    assert "AUTO CDC flow 't_cdc' from 'changes'" in problems and "CDC_INVALID" in problems
    assert "key 'nope' is not among the columns" in problems
    assert "sequence_by ts + 1 does not resolve" in problems
    assert "apply_as_deletes value is a bigint, not a condition" in problems
