"""delta-spark's table builder, convertToDelta and protocol methods on
lakefeed.compat.delta_spark.DeltaTable, called in the forms docs.delta.io documents (builder
chains with string and DataType types, comments, properties, locations, partitions and generated
columns), written for this suite with its own tables; the tables read back by Spark's
``format("delta")`` and by delta-rs, and misuse refused with Delta's codes. Generated columns:
lakefeed's batch and stream writes compute them or refuse a wrong value."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, LongType, StructField

from lakefeed.compat.delta_spark import DeltaTable, IdentityGenerator
from lakefeed.compat.delta_spark.tables import LAKEHOUSE_CONF
from lakefeed.connectors import delta
from lakefeed.core.errors import code_of
from lakefeed.core.lakehouse import Lakehouse

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

CREW = "id int, givenName string, otherNames string, familyName string, role string, " + (
    "hiredAt timestamp, badge string, wage int"
)


ROWS = [
    (1, "Ann", None, "Lee", "cook", dt.datetime(1990, 5, 17, 10, 30), "b1", 10),
    (2, "Bo", None, "Kim", "pilot", None, "b2", 20),
]


@pytest.fixture
def home(spark, tmp_path: Path) -> Iterator[Lakehouse]:
    """Names resolve in a lakehouse of this test (``default.crew`` -> tables/crew)."""
    spark.conf.set(LAKEHOUSE_CONF, str(tmp_path / "lakehouse"))
    try:
        yield Lakehouse.at(tmp_path / "lakehouse")
    finally:
        spark.conf.unset(LAKEHOUSE_CONF)


def _fields(path: str) -> dict[str, dict]:
    schema = json.loads(RsTable(path).schema().to_json())
    return {f["name"]: f for f in schema["fields"]}


def _write_crew(spark, path: str) -> None:
    rows = [(*row[:5], None, *row[6:]) for row in ROWS]
    spark.createDataFrame(rows, CREW).write.format("delta").mode("append").save(path)


def test_docs_create_examples_then_writes_reads_and_replace(spark, home, tmp_path: Path) -> None:
    # docs.delta.io's "Create a table" forms (Python): createIfNotExists by name, then
    # createOrReplace at a path with a property; string types and a column comment.
    (
        DeltaTable.createIfNotExists(spark)
        .tableName("default.crew")
        .addColumn("id", "INT")
        .addColumn("givenName", "STRING")
        .addColumn("otherNames", "STRING")
        .addColumn("familyName", "STRING", comment="family name")
        .addColumn("role", "STRING")
        .addColumn("hiredAt", "TIMESTAMP")
        .addColumn("badge", "STRING")
        .addColumn("wage", "INT")
        .execute()
    )
    (
        DeltaTable.createOrReplace(spark)
        .addColumn("id", "INT")
        .addColumn("givenName", "STRING")
        .addColumn("familyName", "STRING", comment="family name")
        .addColumn("role", "STRING")
        .property("description", "who works the ship")
        .location(str(tmp_path / "delta/crew"))
        .execute()
    )

    named = str(home.table_path("crew"))
    assert _fields(named)["familyName"]["metadata"] == {"comment": "family name"}
    by_path = RsTable(str(tmp_path / "delta/crew"))
    assert by_path.metadata().configuration == {"description": "who works the ship"}

    # the same name again: createIfNotExists changes nothing, create is Delta's error
    again = DeltaTable.createIfNotExists(spark).tableName("default.crew")
    again.addColumn("other", "INT").execute()
    assert RsTable(named).version() == 0
    with pytest.raises(Exception) as exists:
        DeltaTable.create(spark).tableName("default.crew").addColumn("id", "INT").execute()
    assert code_of(exists.value) == "DELTA_TABLE_ALREADY_EXISTS"

    _write_crew(spark, named)
    assert sorted(r.id for r in DeltaTable.forName(spark, "crew").toDF().collect()) == [1, 2]
    assert RsTable(named).to_pyarrow_table().num_rows == 2

    # replace: one commit with the new metadata, every file removed, history kept
    DeltaTable.replace(spark).tableName("default.crew").addColumn(
        "id", LongType(), nullable=False, comment="key"
    ).addColumn("role", "STRING").partitionedBy("role").comment("v2").property(
        "delta.appendOnly", "true"
    ).execute()
    table = RsTable(named)
    assert (table.version(), table.metadata().description) == (2, "v2")
    assert list(table.metadata().partition_columns) == ["role"]
    assert table.metadata().configuration == {"delta.appendOnly": "true"}
    assert _fields(named)["id"] == {
        "name": "id",
        "type": "long",
        "nullable": False,
        "metadata": {"comment": "key"},
    }
    assert table.to_pyarrow_table().num_rows == 0
    assert [h.operation for h in DeltaTable.forPath(spark, named).history().collect()][0] == (
        "CREATE OR REPLACE TABLE"
    )
    assert spark.read.format("delta").load(named).columns == ["id", "role"]

    # NOT NULL is kept by lakefeed's writers: nulls there are refused, other rows land
    rows = spark.createDataFrame([(7, "cook")], "id long, role string")
    rows.write.format("delta").mode("append").save(named)
    nulls = spark.createDataFrame([(None, "pilot")], "id long, role string")
    with pytest.raises(Exception) as not_null:
        nulls.write.format("delta").mode("append").save(named)
    assert "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" in str(not_null.value)
    assert [r.id for r in spark.read.format("delta").load(named).collect()] == [7]
    assert _fields(named)["id"]["nullable"] is False


def test_docs_partitioned_create_and_column_builder(spark, home) -> None:
    # docs.delta.io's "Partition data" form (Python): create by name, partitionedBy a column.
    (
        DeltaTable.create(spark)
        .tableName("default.crew")
        .addColumn("id", "INT")
        .addColumn("givenName", "STRING")
        .addColumn("otherNames", "STRING")
        .addColumn("familyName", "STRING", comment="family name")
        .addColumn("role", "STRING")
        .addColumn("hiredAt", "TIMESTAMP")
        .addColumn("badge", "STRING")
        .addColumn("wage", "INT")
        .partitionedBy("role")
        .execute()
    )

    path = str(home.table_path("crew"))
    _write_crew(spark, path)
    assert RsTable(path).metadata().partition_columns == ["role"]
    frame = spark.read.format("delta").load(path).where("role = 'pilot'")
    assert [r.givenName for r in frame.collect()] == ["Bo"]

    column = DeltaTable.columnBuilder(spark, "day").dataType("DATE").nullable(False)
    field = column.comment("event day").build()
    assert field == StructField("day", DateType(), False, {"comment": "event day"})
    by_list = DeltaTable.createOrReplace(spark).location(str(home.root / "days"))
    by_list.addColumns([field, StructField("n", IntegerType())]).execute()
    assert _fields(str(home.root / "days"))["day"]["nullable"] is False
    with pytest.raises(Exception) as no_type:
        DeltaTable.columnBuilder(spark, "x").build()
    assert code_of(no_type.value) == "DELTA_COLUMN_BUILDER_MISSING_DATA_TYPE"


def test_generated_identity_and_misuse_are_refused(spark, home) -> None:
    def refused(builder) -> str | None:
        with pytest.raises(Exception) as error:
            builder.execute()
        return code_of(error.value)

    identity = (
        DeltaTable.create()
        .tableName("tickets")
        .addColumn("ticket_no", dataType=IntegerType(), generatedByDefaultAs=IdentityGenerator())
    )
    assert refused(identity) == "DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE"
    clustered = DeltaTable.create(spark).tableName("c").addColumn("a", "INT").clusterBy("a")
    clustered = clustered.addColumn("b", "INT").partitionedBy("b")
    assert refused(clustered) == "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"
    assert not home.table_path("c").exists()
    not_sql = DeltaTable.create(spark).tableName("g").addColumn("a", "INT")
    not_sql = not_sql.addColumn("b", "INT", generatedAlwaysAs="a +* 1")
    assert refused(not_sql) == "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN"
    unknown = DeltaTable.create(spark).tableName("g").addColumn("a", "INT")
    assert refused(unknown.addColumn("b", "INT", generatedAlwaysAs="nope + 1")) == (
        "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"
    )
    # the kinds of expression Delta refuses in a generated column, each with its code
    spark.udf.register("tidy_scores", lambda s: s, "array<int>")
    for expression, code, message in [
        ("tidy_scores(scores)", "DELTA_UDF_IN_GENERATED_COLUMN", "cannot use a user-defined"),
        ("rand()", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN", "Found rand()"),
        ("max(scores)", "DELTA_AGGREGATE_IN_GENERATED_COLUMN", "cannot use an aggregate"),
        ("explode(scores)", "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN", "explode(scores)"),
        ("current_timestamp", "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN", "current_times"),
    ]:
        builder = DeltaTable.create(spark).tableName("g").addColumn("scores", "ARRAY<INT>")
        with pytest.raises(Exception) as error:
            builder.addColumn("best", "INT", generatedAlwaysAs=expression).execute()
        assert code_of(error.value) == code
        assert message.lower() in str(error.value).lower()
    typed = DeltaTable.create(spark).tableName("g").addColumn("a", "STRING")
    assert refused(typed.addColumn("b", "INT", generatedAlwaysAs="upper(a)")) == (
        "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH"
    )
    assert not home.table_path("g").exists()

    assert refused(DeltaTable.create(spark).addColumn("a", "INT")) == (
        "DELTA_CREATE_TABLE_MISSING_TABLE_NAME_OR_LOCATION"
    )
    mismatch = DeltaTable.create(spark).tableName("delta.`/tmp/a`").location("/tmp/b")
    assert refused(mismatch.addColumn("a", "INT")) == (
        "DELTA_CREATE_TABLE_IDENTIFIER_LOCATION_MISMATCH"
    )
    missing = DeltaTable.replace(spark).tableName("nope").addColumn("a", "INT")
    assert refused(missing) == "DELTA_CANNOT_REPLACE_MISSING_TABLE"
    assert refused(DeltaTable.create(spark).tableName("e")) == "DELTA_SCHEMA_NOT_PROVIDED"
    bad_part = DeltaTable.create(spark).tableName("e").addColumn("a", "INT").partitionedBy("b")
    assert refused(bad_part) == "DELTA_PARTITION_COLUMN_NOT_FOUND"
    every = DeltaTable.create(spark).tableName("e").addColumn("a", "INT").partitionedBy(["a"])
    assert refused(every) == "DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION"
    twice = DeltaTable.create(spark).tableName("e").addColumn("a", "INT").addColumn("A", "INT")
    assert refused(twice) == "DELTA_DUPLICATE_COLUMNS_FOUND"
    folder = home.root / "parquet_here"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"PAR1")
    occupied = DeltaTable.create(spark).location(str(folder)).addColumn("a", "INT")
    assert refused(occupied) == "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"
    typo = DeltaTable.create(spark).tableName("e").addColumn("a", "INT")
    assert refused(typo.property("delta.appendOnyl", "true")) == "DELTA_UNKNOWN_CONFIGURATION"

    builder = DeltaTable.create(spark)
    with pytest.raises(TypeError, match="Column nullable must be bool"):
        builder.addColumn("a", "INT", nullable="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Schema must be StructType"):
        builder.addColumns("a INT")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot both be set"):
        builder.addColumn(
            "a", "INT", generatedAlwaysAs="1", generatedByDefaultAs=IdentityGenerator()
        )
    with pytest.raises(ValueError, match="step to be non-zero"):
        builder.addColumn("a", "INT", generatedAlwaysAs=IdentityGenerator(step=0))


def test_docs_generated_column_batch_stream_merge_and_refusals(spark, home, tmp_path) -> None:
    # docs.delta.io's "Use generated columns" form (Python): a DataType column generated
    # from another by generatedAlwaysAs, in a partitioned create by name.
    (
        DeltaTable.create(spark)
        .tableName("default.crew")
        .addColumn("id", "INT")
        .addColumn("givenName", "STRING")
        .addColumn("otherNames", "STRING")
        .addColumn("familyName", "STRING", comment="family name")
        .addColumn("role", "STRING")
        .addColumn("hiredAt", "TIMESTAMP")
        .addColumn("hireDate", DateType(), generatedAlwaysAs="CAST(hiredAt AS DATE)")
        .addColumn("badge", "STRING")
        .addColumn("wage", "INT")
        .partitionedBy("role")
        .execute()
    )

    path = str(home.table_path("crew"))
    protocol = RsTable(path).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)

    crew = spark.createDataFrame(ROWS, CREW)
    crew.write.format("delta").mode("append").save(path)  # without the generated column
    born = {r.id: r.hireDate for r in spark.read.format("delta").load(path).collect()}
    assert born == {1: dt.date(1990, 5, 17), 2: None}

    right = crew.where("id = 1").withColumn("id", F.lit(3))
    right = right.withColumn("hireDate", F.to_date("hiredAt"))
    right.write.format("delta").mode("append").save(path)  # given and equal: taken
    wrong = crew.withColumn("hireDate", F.lit(dt.date(2000, 1, 1)))
    with pytest.raises(Exception) as violated:
        wrong.write.format("delta").mode("append").save(path)
    assert code_of(violated.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "\tat " not in str(violated.value)  # the row, not the JVM stack
    assert "Generated Column (`hireDate` <=> CAST(hiredAt AS DATE))" in str(violated.value)
    # the row's values of the column and what its expression reads, as Delta's message
    assert " - hireDate : 2000-01-01\n - hiredAt : " in str(violated.value)
    assert " - givenName" not in str(violated.value)
    lacking = crew.drop("hiredAt").withColumn("hireDate", F.lit(dt.date(2000, 1, 1)))
    with pytest.raises(Exception) as no_input:
        lacking.write.format("delta").mode("append").save(path)
    assert code_of(no_input.value) == "DELTA_GENERATED_COLUMN_INPUT_MISSING"
    assert "computed from `hiredAt`, which the written rows lack" in str(no_input.value)
    with pytest.raises(Exception) as python_sink:
        crew.write.format("delta").mode("append").option("lakefeed.writer", "python").save(path)
    assert code_of(python_sink.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
    assert "has generated columns (hireDate)" in str(python_sink.value)
    python = {"lakefeed.writer": "python"}
    with pytest.raises(Exception) as explicit:  # lakefeed's explicit function, alike
        delta.write(crew, path, mode="append", **python)
    assert code_of(explicit.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
    assert RsTable(path).version() == 2  # the refused writes committed nothing

    # a stream appending rows without the column (availableNow) gets it computed
    source = tmp_path / "landing"
    landed = "id int, role string, hiredAt timestamp"  # role: the partition column
    landing = spark.createDataFrame([(10, "cook", dt.datetime(2001, 2, 3, 4, 5))], landed)
    landing.write.parquet(str(source))
    stream = spark.readStream.schema(landed).parquet(str(source))
    query = (
        stream.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(path)
    )
    query.awaitTermination()
    wrong_day = stream.withColumn("hireDate", F.lit(dt.date(2000, 1, 1)))
    failing = (
        wrong_day.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "ckpt2"))
        .trigger(availableNow=True)
        .start(path)
    )
    with pytest.raises(Exception) as stream_violated:
        failing.awaitTermination()
    assert code_of(stream_violated.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"

    # a new column (mergeSchema) keeps the generation expression in the table's schema
    extra = crew.where("id = 1").withColumn("id", F.lit(4)).withColumn("note", F.lit("x"))
    extra.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    generation = _fields(path)["hireDate"]["metadata"]
    assert generation == {"delta.generationExpression": "CAST(hiredAt AS DATE)"}

    # delta-rs's MERGE and UPDATE do not recompute the column: refused before they run
    target = DeltaTable.forPath(spark, path)
    with pytest.raises(Exception) as merge:
        target.alias("t").merge(crew.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    with pytest.raises(Exception) as update:
        target.update("id = 1", {"hiredAt": "hiredAt + INTERVAL 1 DAY"})
    assert code_of(merge.value) == code_of(update.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"

    table = RsTable(path).to_pyarrow_table(columns=["id", "hireDate"]).to_pylist()
    rows = {r["id"]: r["hireDate"] for r in table}
    assert rows == {
        1: dt.date(1990, 5, 17),
        2: None,
        3: dt.date(1990, 5, 17),
        4: dt.date(1990, 5, 17),
        10: dt.date(2001, 2, 3),
    }


def test_docs_partitioned_by_generated_column(spark, home) -> None:
    # docs.delta.io's "Use generated columns" form (Python): a string-typed generated DATE
    # column among the partition columns.
    (
        DeltaTable.create(spark)
        .tableName("default.readings")
        .addColumn("readingId", "BIGINT")
        .addColumn("payload", "STRING")
        .addColumn("sensorKind", "STRING")
        .addColumn("readAt", "TIMESTAMP")
        .addColumn("readDay", "DATE", generatedAlwaysAs="CAST(readAt AS DATE)")
        .partitionedBy("sensorKind", "readDay")
        .execute()
    )

    path = str(home.table_path("readings"))
    readings = [
        (1, "21.5C", "thermo", dt.datetime(2024, 3, 1, 8)),
        (2, "55%", "humidity", dt.datetime(2024, 3, 2, 9)),
    ]
    frame = spark.createDataFrame(
        readings, "readingId long, payload string, sensorKind string, readAt timestamp"
    )
    frame.write.format("delta").mode("append").save(path)

    adds = pa.table(RsTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sorted(a["partition.readDay"] for a in adds) == [
        dt.date(2024, 3, 1),
        dt.date(2024, 3, 2),
    ]
    by_spark = spark.read.format("delta").load(path).where("readDay = '2024-03-02'")
    assert [r.readingId for r in by_spark.collect()] == [2]
    by_rs = RsTable(path).to_pyarrow_table(columns=["readingId", "readDay"]).to_pylist()
    assert sorted((r["readingId"], r["readDay"]) for r in by_rs) == [
        (1, dt.date(2024, 3, 1)),
        (2, dt.date(2024, 3, 2)),
    ]


def test_docs_convert_to_delta_and_protocol(spark, tmp_path: Path) -> None:
    plain, parted = tmp_path / "plain", tmp_path / "parted"
    plain.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), plain / "f.parquet")
    for part in (1, 2):
        (parted / f"part={part}").mkdir(parents=True)
        pq.write_table(pa.table({"v": [f"x{part}"]}), parted / f"part={part}" / "f.parquet")

    # docs.delta.io's convertToDelta forms (Python): a parquet.`path` identifier, alone and
    # with the partition schema as a DDL string.
    converted = DeltaTable.convertToDelta(spark, f"parquet.`{plain}`")
    converted_parts = DeltaTable.convertToDelta(spark, f"parquet.`{parted}`", "part int")

    assert sorted(r.a for r in converted.toDF().collect()) == [1, 2]
    rows = converted_parts.toDF().orderBy("part").collect()
    assert [(r.v, r.part) for r in rows] == [("x1", 1), ("x2", 2)]
    assert RsTable(str(parted)).metadata().partition_columns == ["part"]
    assert RsTable(str(parted)).to_pyarrow_table().num_rows == 2
    assert DeltaTable.convertToDelta(spark, f"parquet.`{plain}`").history().count() == 1
    with pytest.raises(Exception) as not_parquet:
        DeltaTable.convertToDelta(spark, f"csv.`{plain}`")
    assert code_of(not_parquet.value) == "DELTA_CONVERT_NON_PARQUET_TABLE"

    # the protocol methods docs.delta.io documents (feature compatibility page), by path
    delta = DeltaTable.forPath(spark, str(plain))
    delta.upgradeTableProtocol(1, 3)  # reader 1, writer 3
    protocol = RsTable(str(plain)).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 3)
    delta.addFeatureSupport("changeDataFeed")
    detail = delta.detail().first()
    assert (detail.minReaderVersion, detail.minWriterVersion) == (1, 7)
    assert not any(key.startswith("delta.min") for key in detail.properties)  # as Delta shows
    assert detail.tableFeatures == [
        "appendOnly",
        "changeDataFeed",
        "checkConstraints",
        "invariants",
    ]
    spark.createDataFrame([(3,)], "a long").write.format("delta").mode("append").save(str(plain))
    assert sorted(r.a for r in delta.toDF().collect()) == [1, 2, 3]

    def refused(call) -> str | None:
        with pytest.raises(Exception) as error:
            call()
        return code_of(error.value)

    assert refused(lambda: delta.upgradeTableProtocol(1, 2)) == "DELTA_INVALID_PROTOCOL_DOWNGRADE"
    assert refused(lambda: delta.upgradeTableProtocol(4, 7)) == "DELTA_UNSUPPORTED_PROTOCOL_VERSION"
    assert refused(lambda: delta.addFeatureSupport("rowTracking")) == (
        "DELTA_UNSUPPORTED_BY_LAKEFEED"
    )
    assert refused(lambda: delta.addFeatureSupport("noSuchFeature")) == (
        "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    )
    for call in (
        lambda: delta.dropFeatureSupport("changeDataFeed"),
        lambda: delta.clone(str(tmp_path / "copy"), isShallow=True),
    ):
        assert refused(call) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    deep = refused(lambda: delta.cloneAtVersion(0, str(tmp_path / "copy")))
    assert deep == "DELTA_UNSUPPORTED_DEEP_CLONE"
    # without a lakehouse, names go to Spark's managed layout (as forName looks them up)
    DeltaTable.create(spark).tableName("analytics.builder_t").addColumn("a", "INT").execute()
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert RsTable(str(warehouse / "analytics.db" / "builder_t")).version() == 0
    assert DeltaTable.forName(spark, "analytics.builder_t").toDF().columns == ["a"]

    # generate(mode), the form docs.delta.io documents for manifest files
    manifested = DeltaTable.forPath(spark, str(parted))
    manifested.generate("symlink_format_manifest")
    manifest = parted / "_symlink_format_manifest" / "part=1" / "manifest"
    assert manifest.read_text().startswith(f"file:{parted}/part=1/")
    assert refused(lambda: manifested.generate("other")) == "DELTA_MODE_NOT_SUPPORTED"
    with pytest.raises(ValueError, match="readerVersion needs to be an integer"):
        delta.upgradeTableProtocol("1", 3)  # type: ignore[arg-type]
