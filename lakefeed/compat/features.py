"""What of DLT's ``import dlt`` and SDP's ``pyspark.pipelines`` lakefeed runs: one row per
decorator, function, argument and spec field, with its status on lakefeed and the test that
shows it.

The docs' compatibility table is generated from :data:`FEATURES` (``docs/hooks/reference.py``),
and tests keep the table honest: every parameter of :mod:`lakefeed.compat.dlt`'s functions has
a row, every ``refused`` row is refused by the code with its ``code``, and every ``supported``
or ``differs`` row names a test that exists (mostly the documented-examples corpus,
``tests/compat/test_corpus.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["supported", "differs", "refused"]

CORPUS = "tests/compat/test_corpus.py"
DLT_TESTS = "tests/compat/test_dlt.py"
SDP_TESTS = "tests/compat/test_sdp.py"
FIRST = "tests/compat/test_session_first.py"


@dataclass(frozen=True)
class Feature:
    """One entry: ``api`` (``dlt`` or ``sdp``), the function (or spec field) and argument
    (``""``: the function itself), its status, the error code of a refusal, a note on what
    differs or what to do instead, and the test showing it (``path::test``)."""

    api: Literal["dlt", "sdp"]
    function: str
    argument: str
    status: Status
    note: str = ""
    test: str = ""
    code: str = ""


def _ok(
    api: Literal["dlt", "sdp"], function: str, args: str, test: str, note: str = ""
) -> list[Feature]:
    """Rows for ``function`` and each of its space-separated ``args``, all supported."""
    return [Feature(api, function, arg, "supported", note, test) for arg in ["", *args.split()]]


_DLT_PY = f"{CORPUS}::test_dlt_python_reference"
_CDC = f"{FIRST}::test_auto_cdc_with_column_arguments_runs_from_the_cli"
_SNAPSHOT = f"{CORPUS}::test_dlt_auto_cdc_from_snapshot"
_SDP_PY = f"{CORPUS}::test_sdp_guide_python"
_SDP_SQL = f"{CORPUS}::test_sdp_guide_sql"
_CLUSTERED = "tests/delta/test_clustered_tables.py::test_pipeline_tables_declared_clustered"
_CLUSTER = (
    "a clustered Delta table (writer features clustering, domainMetadata; the delta.clustering "
    "domain); lakefeed does not cluster its files, and not with partition_cols"
)
_CLUSTER_AUTO = "lakefeed cannot choose clustering columns: name them with cluster_by"
_NAMES = "tests/compat/test_sdp_names.py::test_qualified_names_in_forname_and_the_test_kit"
_DATABASE = (
    "the lakehouse is the pipeline's one database: x, db.x and cat.db.x name one table (in "
    "reads, DeltaTable.forName inside flows, PipelineTest.rows); another database's name is "
    "that database's table, never one the pipeline defines"
)

FEATURES: tuple[Feature, ...] = (
    *_ok("dlt", "table", "query_function comment table_properties", _DLT_PY),
    Feature(
        "dlt",
        "table",
        "name",
        "supported",
        "",
        f"{DLT_TESTS}::test_the_shim_is_dlt_only_while_loading",
    ),
    Feature(
        "dlt",
        "table",
        "partition_cols",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_declared_schema_shapes_the_table",
    ),
    Feature(
        "dlt",
        "table",
        "schema",
        "supported",
        "DDL or StructType; named CHECKs, generated columns",
        f"{DLT_TESTS}::test_a_declared_schema_shapes_the_table",
    ),
    Feature(
        "dlt",
        "table",
        "spark_conf",
        "supported",
        "",
        f"{DLT_TESTS}::test_spark_conf_applies_to_its_table_or_flow_alone",
    ),
    Feature(
        "dlt",
        "table",
        "private",
        "supported",
        "kept out of the lakehouse's listings",
        f"{DLT_TESTS}::test_private_tables_are_stored_but_not_published",
    ),
    Feature(
        "dlt",
        "table",
        "temporary",
        "supported",
        "DLT's older name of private",
        f"{DLT_TESTS}::test_private_tables_are_stored_but_not_published",
    ),
    Feature(
        "dlt",
        "table",
        "path",
        "supported",
        "absolute path or URI; never moved without a full refresh",
        f"{DLT_TESTS}::test_a_table_at_its_own_path",
    ),
    Feature("dlt", "table", "cluster_by", "differs", _CLUSTER, _CLUSTERED),
    Feature(
        "dlt",
        "table",
        "cluster_by_auto",
        "refused",
        _CLUSTER_AUTO,
        f"{DLT_TESTS}::test_what_lakefeed_cannot_honour_is_refused",
        "DLT_UNSUPPORTED",
    ),
    Feature(
        "dlt",
        "table",
        "row_filter",
        "refused",
        "a Unity Catalog feature: filter in the query",
        f"{DLT_TESTS}::test_what_lakefeed_cannot_honour_is_refused",
        "DLT_UNSUPPORTED",
    ),
    *_ok("dlt", "view", "query_function", _DLT_PY),
    Feature("dlt", "view", "name", "supported", "", _SNAPSHOT),
    Feature(
        "dlt",
        "view",
        "comment",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged",
    ),
    *_ok(
        "dlt",
        "materialized_view",
        "func name comment partition_cols table_properties spark_conf",
        _DLT_PY,
        "also @dlt.table over batch reads",
    ),
    Feature("dlt", "materialized_view", "cluster_by", "differs", _CLUSTER, _CLUSTERED),
    *_ok("dlt", "create_streaming_table", "name", _DLT_PY),
    Feature(
        "dlt",
        "create_streaming_table",
        "comment",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "spark_conf",
        "supported",
        "",
        f"{DLT_TESTS}::test_spark_conf_applies_to_its_table_or_flow_alone",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "table_properties",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "partition_cols",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_declared_schema_shapes_the_table",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "schema",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_declared_schema_shapes_the_table",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "path",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_table_at_its_own_path",
    ),
    *[
        Feature(
            "dlt",
            "create_streaming_table",
            arg,
            "supported",
            "",
            f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged",
        )
        for arg in ("expect_all", "expect_all_or_drop", "expect_all_or_fail")
    ],
    Feature("dlt", "create_streaming_table", "cluster_by", "differs", _CLUSTER, _CLUSTERED),
    Feature(
        "dlt",
        "create_streaming_table",
        "cluster_by_auto",
        "refused",
        _CLUSTER_AUTO,
        "",
        "DLT_UNSUPPORTED",
    ),
    Feature(
        "dlt",
        "create_streaming_table",
        "row_filter",
        "refused",
        "filter in the query",
        "",
        "DLT_UNSUPPORTED",
    ),
    *_ok("dlt", "append_flow", "target name once", _DLT_PY, "once=True: a one-off batch backfill"),
    Feature(
        "dlt",
        "append_flow",
        "spark_conf",
        "supported",
        "",
        f"{DLT_TESTS}::test_spark_conf_applies_to_its_table_or_flow_alone",
    ),
    Feature(
        "dlt",
        "append_flow",
        "comment",
        "supported",
        "",
        f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged",
    ),
    *_ok(
        "dlt",
        "create_sink",
        "name format options",
        _DLT_PY,
        "formats delta, kafka, postgres or any Spark writes",
    ),
    *_ok("dlt", "foreach_batch_sink", "func name", _DLT_PY),
    *[
        f
        for name in ("expect", "expect_or_drop", "expect_or_fail")
        for f in _ok(
            "dlt", name, "name predicate", f"{DLT_TESTS}::test_a_dlt_pipeline_runs_unchanged"
        )
    ],
    *[
        f
        for name in ("expect_all", "expect_all_or_drop", "expect_all_or_fail")
        for f in _ok("dlt", name, "rules", _DLT_PY)
    ],
    *_ok("dlt", "read", "name", _DLT_PY),
    *_ok("dlt", "read_stream", "name", _DLT_PY),
    Feature(
        "dlt",
        "read_stream",
        "options",
        "supported",
        "lakefeed's Delta reader options",
        f"{DLT_TESTS}::test_reader_options_reach_a_pipeline_read",
    ),
    Feature("dlt", "read", "options", "supported", "lakefeed's Delta reader options", _DLT_PY),
    *_ok(
        "dlt",
        "create_auto_cdc_flow",
        "target source keys sequence_by apply_as_deletes apply_as_truncates except_column_list "
        "stored_as_scd_type",
        _CDC,
        "Column or SQL text arguments",
    ),
    *_ok(
        "dlt",
        "create_auto_cdc_flow",
        "ignore_null_updates column_list track_history_column_list "
        "track_history_except_column_list name flow_name",
        "tests/cdc/test_declare.py",
    )[1:],
    Feature(
        "dlt",
        "create_auto_cdc_flow",
        "once",
        "supported",
        "a one-off backfill: the source read in batch and applied once (SQL AUTO CDC ONCE INTO)",
        "tests/cdc/test_once_flow.py::test_a_later_run_applies_only_the_live_changes",
    ),
    *_ok(
        "dlt",
        "create_auto_cdc_from_snapshot_flow",
        "target source keys stored_as_scd_type",
        _SNAPSHOT,
    ),
    *_ok(
        "dlt",
        "create_auto_cdc_from_snapshot_flow",
        "track_history_column_list track_history_except_column_list name flow_name",
        "tests/cdc/test_snapshot_pipeline.py",
    )[1:],
    Feature(
        "dlt",
        "create_auto_cdc_from_snapshot_flow",
        "once",
        "refused",
        "a snapshot flow applies each new snapshot on every update",
        f"{DLT_TESTS}::test_what_lakefeed_cannot_honour_is_refused",
        "DLT_UNSUPPORTED",
    ),
    Feature(
        "dlt", "spark.conf.get", "", "supported", "pipeline configuration as Spark confs", _DLT_PY
    ),
    Feature(
        "dlt", "Auto Loader", "cloudFiles", "supported", "lakefeed's own cloudFiles source", _DLT_PY
    ),
    *_ok("sdp", "spark-pipeline.yml", "name libraries configuration", _SDP_PY),
    Feature(
        "sdp",
        "spark-pipeline.yml",
        "storage",
        "differs",
        "the lakehouse when --lakehouse is not given: checkpoints, tables, event log",
        _SDP_PY,
    ),
    Feature(
        "sdp",
        "spark-pipeline.yml",
        "catalog",
        "differs",
        _DATABASE,
        _NAMES,
    ),
    Feature(
        "sdp",
        "spark-pipeline.yml",
        "database",
        "differs",
        _DATABASE,
        _NAMES,
    ),
    Feature(
        "sdp",
        "spark-pipelines init",
        "",
        "supported",
        "its Python and SQL template",
        f"{FIRST}::test_an_sdp_project_using_spark_at_module_level_runs_from_the_cli",
    ),
    *_ok("sdp", "table", "name", _SDP_PY, "a streaming table: a batch query is refused, as by SDP"),
    Feature(
        "sdp",
        "table",
        "cluster_by",
        "differs",
        _CLUSTER,
        "tests/delta/test_clustered_tables.py::test_sdp_tables_take_cluster_by",
    ),
    Feature("sdp", "table", "format", "refused", "every table is Delta", "", "SDP_UNSUPPORTED"),
    *_ok("sdp", "materialized_view", "name", _SDP_PY),
    *_ok("sdp", "temporary_view", "", _SDP_PY),
    *_ok("sdp", "create_streaming_table", "name", _SDP_PY),
    *_ok("sdp", "append_flow", "target", _SDP_PY),
    Feature(
        "sdp",
        "append_flow",
        "name",
        "supported",
        "",
        f"{SDP_TESTS}::test_a_spec_folder_runs_as_spark_pipelines_would",
    ),
    Feature(
        "sdp",
        "spark.read.table / spark.table",
        "",
        "supported",
        "the pipeline's datasets, else Spark's tables",
        _SDP_PY,
    ),
    Feature(
        "sdp",
        "spark.readStream.table",
        "",
        "supported",
        "the pipeline's datasets, else Spark's tables",
        _SDP_PY,
    ),
    Feature(
        "sdp",
        "SQL CREATE MATERIALIZED VIEW / TEMPORARY VIEW / STREAMING TABLE",
        "",
        "supported",
        "",
        _SDP_SQL,
    ),
    Feature(
        "sdp", "SQL CREATE FLOW ... INSERT INTO", "", "supported", "INSERT ONCE INTO too", _SDP_SQL
    ),
    Feature(
        "sdp",
        "SQL CREATE FLOW ... INSERT INTO ... BY NAME",
        "",
        "supported",
        "columns matched by name; the target may be qualified with the pipeline's database",
        f"{SDP_TESTS}::test_create_flow_insert_into_by_name",
    ),
    Feature(
        "sdp",
        "SQL STREAM(x)",
        "",
        "supported",
        "a dataset, else a table of Spark's catalog",
        _SDP_SQL,
    ),
    Feature(
        "sdp",
        "SQL CLUSTER BY",
        "",
        "differs",
        _CLUSTER.replace("partition_cols", "PARTITIONED BY"),
        _CLUSTERED,
    ),
    Feature(
        "sdp",
        "SQL CLUSTER BY AUTO",
        "",
        "refused",
        _CLUSTER_AUTO.replace("with cluster_by", "as CLUSTER BY (col, ...)"),
        f"{SDP_TESTS}::test_a_sql_table_clustered_automatically_is_refused_with_the_alternative",
        "CLUSTERING_UNSUPPORTED",
    ),
    Feature(
        "sdp",
        'spark.readStream.format("kafka")',
        "",
        "supported",
        "Spark's options; lakefeed's Kafka source when Spark's jar is absent",
        f"{CORPUS}::test_sdp_guide_kafka",
    ),
    Feature(
        "sdp",
        "spark.readStream.option(...).table",
        "",
        "supported",
        "the reader's options reach the pipeline read (skipChangeCommits, ...)",
        f"{DLT_TESTS}::test_reader_options_reach_a_pipeline_read",
    ),
    Feature(
        "dlt",
        "SQL CONSTRAINT EXPECT / APPLY CHANGES INTO / CREATE FLOW",
        "",
        "supported",
        "",
        f"{CORPUS}::test_dlt_sql_reference",
    ),
    Feature(
        "dlt",
        "SQL read_files / cloud_files",
        "",
        "supported",
        "lakefeed's cloudFiles source, same options; _metadata only where the query names it",
        "tests/pipeline/test_sql_read_files.py::test_sql_ingestion_runs_exactly_once_over_two_runs",
    ),
)
"""Every entry, DLT's then SDP's."""
