"""delta-spark's table builder, convertToDelta and protocol methods on
lakefeed.compat.delta_spark.DeltaTable: docs.delta.io's examples run verbatim (only the import
differs), the tables read back by Spark's ``format("delta")`` and by delta-rs, and misuse refused
with Delta's codes. Generated columns: lakefeed's batch and stream writes compute them or refuse a
wrong value."""

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

PEOPLE = "id int, firstName string, middleName string, lastName string, gender string, " + (
    "birthDate timestamp, ssn string, salary int"
)


ROWS = [
    (1, "Ann", None, "Lee", "F", dt.datetime(1990, 5, 17, 10, 30), "1", 10),
    (2, "Bo", None, "Kim", "M", None, "2", 20),
]


@pytest.fixture
def home(spark, tmp_path: Path) -> Iterator[Lakehouse]:
    """Names resolve in a lakehouse of this test (``default.people10m`` -> tables/people10m)."""
    spark.conf.set(LAKEHOUSE_CONF, str(tmp_path / "lakehouse"))
    try:
        yield Lakehouse.at(tmp_path / "lakehouse")
    finally:
        spark.conf.unset(LAKEHOUSE_CONF)


def _fields(path: str) -> dict[str, dict]:
    schema = json.loads(RsTable(path).schema().to_json())
    return {f["name"]: f for f in schema["fields"]}


def _write_people(spark, path: str) -> None:
    rows = [(1, "Ann", None, "Lee", "F", None, "1", 10), (2, "Bo", None, "Kim", "M", None, "2", 20)]
    spark.createDataFrame(rows, PEOPLE).write.format("delta").mode("append").save(path)


def test_docs_create_examples_then_writes_reads_and_replace(spark, home, tmp_path: Path) -> None:
    # docs.delta.io, "Create a table" (Python), verbatim:
    # Create table in the metastore
    DeltaTable.createIfNotExists(spark) \
      .tableName("default.people10m") \
      .addColumn("id", "INT") \
      .addColumn("firstName", "STRING") \
      .addColumn("middleName", "STRING") \
      .addColumn("lastName", "STRING", comment = "surname") \
      .addColumn("gender", "STRING") \
      .addColumn("birthDate", "TIMESTAMP") \
      .addColumn("ssn", "STRING") \
      .addColumn("salary", "INT") \
      .execute()  # fmt: skip

    # Create or replace table with path and add properties
    DeltaTable.createOrReplace(spark) \
      .addColumn("id", "INT") \
      .addColumn("firstName", "STRING") \
      .addColumn("middleName", "STRING") \
      .addColumn("lastName", "STRING", comment = "surname") \
      .addColumn("gender", "STRING") \
      .addColumn("birthDate", "TIMESTAMP") \
      .addColumn("ssn", "STRING") \
      .addColumn("salary", "INT") \
      .property("description", "table with people data") \
      .location(str(tmp_path / "delta/people10m")) \
      .execute()  # fmt: skip

    named = str(home.table_path("people10m"))
    assert _fields(named)["lastName"]["metadata"] == {"comment": "surname"}
    by_path = RsTable(str(tmp_path / "delta/people10m"))
    assert by_path.metadata().configuration == {"description": "table with people data"}

    # the same name again: createIfNotExists changes nothing, create is Delta's error
    again = DeltaTable.createIfNotExists(spark).tableName("default.people10m")
    again.addColumn("other", "INT").execute()
    assert RsTable(named).version() == 0
    with pytest.raises(Exception) as exists:
        DeltaTable.create(spark).tableName("default.people10m").addColumn("id", "INT").execute()
    assert code_of(exists.value) == "DELTA_TABLE_ALREADY_EXISTS"

    _write_people(spark, named)
    assert sorted(r.id for r in DeltaTable.forName(spark, "people10m").toDF().collect()) == [1, 2]
    assert RsTable(named).to_pyarrow_table().num_rows == 2

    # replace: one commit with the new metadata, every file removed, history kept
    DeltaTable.replace(spark).tableName("default.people10m").addColumn(
        "id", LongType(), nullable=False, comment="key"
    ).addColumn("gender", "STRING").partitionedBy("gender").comment("v2").property(
        "delta.appendOnly", "true"
    ).execute()
    table = RsTable(named)
    assert (table.version(), table.metadata().description) == (2, "v2")
    assert list(table.metadata().partition_columns) == ["gender"]
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
    assert spark.read.format("delta").load(named).columns == ["id", "gender"]

    # NOT NULL is kept by lakefeed's writers: nulls there are refused, other rows land
    rows = spark.createDataFrame([(7, "F")], "id long, gender string")
    rows.write.format("delta").mode("append").save(named)
    nulls = spark.createDataFrame([(None, "M")], "id long, gender string")
    with pytest.raises(Exception) as not_null:
        nulls.write.format("delta").mode("append").save(named)
    assert "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" in str(not_null.value)
    assert [r.id for r in spark.read.format("delta").load(named).collect()] == [7]
    assert _fields(named)["id"]["nullable"] is False


def test_docs_partitioned_create_and_column_builder(spark, home) -> None:
    # docs.delta.io, "Partition data" (Python), verbatim:
    DeltaTable.create(spark) \
      .tableName("default.people10m") \
      .addColumn("id", "INT") \
      .addColumn("firstName", "STRING") \
      .addColumn("middleName", "STRING") \
      .addColumn("lastName", "STRING", comment = "surname") \
      .addColumn("gender", "STRING") \
      .addColumn("birthDate", "TIMESTAMP") \
      .addColumn("ssn", "STRING") \
      .addColumn("salary", "INT") \
      .partitionedBy("gender") \
      .execute()  # fmt: skip

    path = str(home.table_path("people10m"))
    _write_people(spark, path)
    assert RsTable(path).metadata().partition_columns == ["gender"]
    frame = spark.read.format("delta").load(path).where("gender = 'M'")
    assert [r.firstName for r in frame.collect()] == ["Bo"]

    column = DeltaTable.columnBuilder(spark, "day").dataType("DATE").nullable(False)
    field = column.comment("event day").build()
    assert field == StructField("day", DateType(), False, {"comment": "event day"})
    by_list = DeltaTable.createOrReplace(spark).location(str(home.root / "days"))
    by_list.addColumns([field, StructField("n", IntegerType())]).execute()
    assert _fields(str(home.root / "days"))["day"]["nullable"] is False
    with pytest.raises(Exception) as no_type:
        DeltaTable.columnBuilder(spark, "x").build()
    assert code_of(no_type.value) == "DELTA_COLUMN_BUILDER_MISSING_DATA_TYPE"


def test_generated_identity_clustering_and_misuse_are_refused(spark, home) -> None:
    def refused(builder) -> str | None:
        with pytest.raises(Exception) as error:
            builder.execute()
        return code_of(error.value)

    identity = (
        DeltaTable.create()
        .tableName("table_name")
        .addColumn("id_col3", dataType=LongType(), generatedByDefaultAs=IdentityGenerator())
    )
    assert refused(identity) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    clustered = DeltaTable.create(spark).tableName("c").addColumn("a", "INT").clusterBy("a")
    assert refused(clustered) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    assert not home.table_path("c").exists()
    not_sql = DeltaTable.create(spark).tableName("g").addColumn("a", "INT")
    not_sql = not_sql.addColumn("b", "INT", generatedAlwaysAs="a +* 1")
    assert refused(not_sql) == "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN"
    unknown = DeltaTable.create(spark).tableName("g").addColumn("a", "INT")
    assert refused(unknown.addColumn("b", "INT", generatedAlwaysAs="nope + 1")) == (
        "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"
    )
    # GeneratedColumnSuite "validateGeneratedColumns: unsupported expressions", in Python:
    spark.udf.register("myudf", lambda s: s, "array<int>")
    for expression, code, message in [
        ("myudf(foo)", "DELTA_UDF_IN_GENERATED_COLUMN", "cannot use a user-defined function"),
        ("rand()", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN", "Found rand()"),
        ("max(foo)", "DELTA_AGGREGATE_IN_GENERATED_COLUMN", "cannot use an aggregate"),
        ("explode(foo)", "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN", "explode(foo) cannot"),
        ("current_timestamp", "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN", "current_times"),
    ]:
        builder = DeltaTable.create(spark).tableName("g").addColumn("foo", "ARRAY<INT>")
        with pytest.raises(Exception) as error:
            builder.addColumn("bar", "INT", generatedAlwaysAs=expression).execute()
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
    # docs.delta.io, "Create a table" / "Use generated columns" (Python), verbatim:
    DeltaTable.create(spark) \
      .tableName("default.people10m") \
      .addColumn("id", "INT") \
      .addColumn("firstName", "STRING") \
      .addColumn("middleName", "STRING") \
      .addColumn("lastName", "STRING", comment = "surname") \
      .addColumn("gender", "STRING") \
      .addColumn("birthDate", "TIMESTAMP") \
      .addColumn("dateOfBirth", DateType(), generatedAlwaysAs="CAST(birthDate AS DATE)") \
      .addColumn("ssn", "STRING") \
      .addColumn("salary", "INT") \
      .partitionedBy("gender") \
      .execute()  # fmt: skip

    path = str(home.table_path("people10m"))
    protocol = RsTable(path).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)

    people = spark.createDataFrame(ROWS, PEOPLE)
    people.write.format("delta").mode("append").save(path)  # without the generated column
    born = {r.id: r.dateOfBirth for r in spark.read.format("delta").load(path).collect()}
    assert born == {1: dt.date(1990, 5, 17), 2: None}

    right = people.where("id = 1").withColumn("id", F.lit(3))
    right = right.withColumn("dateOfBirth", F.to_date("birthDate"))
    right.write.format("delta").mode("append").save(path)  # given and equal: taken
    wrong = people.withColumn("dateOfBirth", F.lit(dt.date(2000, 1, 1)))
    with pytest.raises(Exception) as violated:
        wrong.write.format("delta").mode("append").save(path)
    assert code_of(violated.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "\tat " not in str(violated.value)  # the row, not the JVM stack
    assert "Generated Column (`dateOfBirth` <=> CAST(birthDate AS DATE))" in str(violated.value)
    # the row's values of the column and what its expression reads, as Delta's message
    assert " - dateOfBirth : 2000-01-01\n - birthDate : " in str(violated.value)
    assert " - firstName" not in str(violated.value)
    lacking = people.drop("birthDate").withColumn("dateOfBirth", F.lit(dt.date(2000, 1, 1)))
    with pytest.raises(Exception) as no_input:
        lacking.write.format("delta").mode("append").save(path)
    assert code_of(no_input.value) == "DELTA_GENERATED_COLUMN_INPUT_MISSING"
    assert "computed from `birthDate`, which the written rows lack" in str(no_input.value)
    with pytest.raises(Exception) as python_sink:
        people.write.format("delta").mode("append").option("lakefeed.writer", "python").save(path)
    assert code_of(python_sink.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
    assert "has generated columns (dateOfBirth)" in str(python_sink.value)
    python = {"lakefeed.writer": "python"}
    with pytest.raises(Exception) as explicit:  # lakefeed's explicit function, alike
        delta.write(people, path, mode="append", **python)
    assert code_of(explicit.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
    assert RsTable(path).version() == 2  # the refused writes committed nothing

    # a stream appending rows without the column (availableNow) gets it computed
    source = tmp_path / "landing"
    landed = "id int, gender string, birthDate timestamp"  # gender: the partition column
    spark.createDataFrame([(10, "F", dt.datetime(2001, 2, 3, 4, 5))], landed) \
        .write.parquet(str(source))  # fmt: skip
    stream = spark.readStream.schema(landed).parquet(str(source))
    query = (
        stream.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(path)
    )
    query.awaitTermination()
    wrong_day = stream.withColumn("dateOfBirth", F.lit(dt.date(2000, 1, 1)))
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
    extra = people.where("id = 1").withColumn("id", F.lit(4)).withColumn("note", F.lit("x"))
    extra.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    generation = _fields(path)["dateOfBirth"]["metadata"]
    assert generation == {"delta.generationExpression": "CAST(birthDate AS DATE)"}

    # delta-rs's MERGE and UPDATE do not recompute the column: refused before they run
    target = DeltaTable.forPath(spark, path)
    with pytest.raises(Exception) as merge:
        target.alias("t").merge(
            people.alias("s"), "t.id = s.id"
        ).whenNotMatchedInsertAll().execute()
    with pytest.raises(Exception) as update:
        target.update("id = 1", {"birthDate": "birthDate + INTERVAL 1 DAY"})
    assert code_of(merge.value) == code_of(update.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"

    table = RsTable(path).to_pyarrow_table(columns=["id", "dateOfBirth"]).to_pylist()
    rows = {r["id"]: r["dateOfBirth"] for r in table}
    assert rows == {
        1: dt.date(1990, 5, 17),
        2: None,
        3: dt.date(1990, 5, 17),
        4: dt.date(1990, 5, 17),
        10: dt.date(2001, 2, 3),
    }


def test_docs_partitioned_by_generated_column(spark, home) -> None:
    # docs.delta.io, "Use generated columns" (Python), verbatim:
    DeltaTable.create(spark) \
      .tableName("default.events") \
      .addColumn("eventId", "BIGINT") \
      .addColumn("data", "STRING") \
      .addColumn("eventType", "STRING") \
      .addColumn("eventTime", "TIMESTAMP") \
      .addColumn("eventDate", "DATE", generatedAlwaysAs="CAST(eventTime AS DATE)") \
      .partitionedBy("eventType", "eventDate") \
      .execute()  # fmt: skip

    path = str(home.table_path("events"))
    events = [
        (1, "a", "click", dt.datetime(2024, 3, 1, 8)),
        (2, "b", "view", dt.datetime(2024, 3, 2, 9)),
    ]
    frame = spark.createDataFrame(
        events, "eventId long, data string, eventType string, eventTime timestamp"
    )
    frame.write.format("delta").mode("append").save(path)

    adds = pa.table(RsTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sorted(a["partition.eventDate"] for a in adds) == [
        dt.date(2024, 3, 1),
        dt.date(2024, 3, 2),
    ]
    by_spark = spark.read.format("delta").load(path).where("eventDate = '2024-03-02'")
    assert [r.eventId for r in by_spark.collect()] == [2]
    by_rs = RsTable(path).to_pyarrow_table(columns=["eventId", "eventDate"]).to_pylist()
    assert sorted((r["eventId"], r["eventDate"]) for r in by_rs) == [
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

    # docs.delta.io, "Convert a Parquet table to a Delta table" (Python), paths filled in:
    # Convert unpartitioned Parquet table at path '<path-to-table>'
    deltaTable = DeltaTable.convertToDelta(spark, f"parquet.`{plain}`")
    # Convert partitioned parquet table at path '<path-to-table>' and partitioned by integer
    # column named 'part'
    partitionedDeltaTable = DeltaTable.convertToDelta(spark, f"parquet.`{parted}`", "part int")

    assert sorted(r.a for r in deltaTable.toDF().collect()) == [1, 2]
    rows = partitionedDeltaTable.toDF().orderBy("part").collect()
    assert [(r.v, r.part) for r in rows] == [("x1", 1), ("x2", 2)]
    assert RsTable(str(parted)).metadata().partition_columns == ["part"]
    assert RsTable(str(parted)).to_pyarrow_table().num_rows == 2
    assert DeltaTable.convertToDelta(spark, f"parquet.`{plain}`").history().count() == 1
    with pytest.raises(Exception) as not_parquet:
        DeltaTable.convertToDelta(spark, f"csv.`{plain}`")
    assert code_of(not_parquet.value) == "DELTA_CONVERT_NON_PARQUET_TABLE"

    # docs.delta.io, "How does Delta Lake manage feature compatibility?" (Python):
    delta = DeltaTable.forPath(spark, str(plain))  # or DeltaTable.forName
    delta.upgradeTableProtocol(1, 3)  # upgrades to readerVersion=1, writerVersion=3
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

    # docs.delta.io, "Generate a manifest file" (Python):
    deltaTable = DeltaTable.forPath(spark, str(parted))
    deltaTable.generate("symlink_format_manifest")
    manifest = parted / "_symlink_format_manifest" / "part=1" / "manifest"
    assert manifest.read_text().startswith(f"file:{parted}/part=1/")
    assert refused(lambda: deltaTable.generate("other")) == "DELTA_MODE_NOT_SUPPORTED"
    with pytest.raises(ValueError, match="readerVersion needs to be an integer"):
        delta.upgradeTableProtocol("1", 3)  # type: ignore[arg-type]
