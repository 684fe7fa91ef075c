"""The one module that patches pyspark: what it wraps, that it can be taken out again, that it
refuses a pyspark it was not written for, and that it leaves other formats as Spark made them."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pyspark.sql
import pyspark.sql.readwriter
import pyspark.sql.streaming.readwriter
import pytest
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

from lakefeed.compat import patches as compat
from lakefeed.connectors import delta, registry
from lakefeed.core.errors import ConfigError, code_of

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _patched_pyspark_methods() -> list[str]:
    modules = (pyspark.sql, pyspark.sql.readwriter, pyspark.sql.streaming.readwriter)
    found = []
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for name, member in vars(cls).items():
                if getattr(member, "_lakefeed_wrapped", False):
                    found.append(f"{cls.__name__}.{name}")
    return sorted(set(found))


def test_the_table_lists_every_wrapped_method(spark) -> None:
    listed = {f"{p.cls.__name__}.{p.method}" for p in compat.PATCHES}
    assert set(_patched_pyspark_methods()) == listed
    assert {f"{c.__name__}.{m}" for c, m in compat.installed()} == listed
    assert all(p.why for p in compat.PATCHES)


def test_uninstall_restores_pyspark_and_the_runtime_still_works(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    try:
        compat.uninstall()
        assert _patched_pyspark_methods() == []
        assert compat.installed() == []
        # lakefeed's own calls need no patch: write and read back, batch and stream.
        delta.write(spark.range(3).selectExpr("id", "id % 2 AS p"), path, partition_by=["p"])
        assert sorted(r.id for r in delta.read(spark, path).collect()) == [0, 1, 2]
        rows: list = []
        query = (
            delta.read_stream(spark, path)
            .writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        assert sorted(r.id for r in rows) == [0, 1, 2]
        assert DeltaTable(path).metadata().partition_columns == ["p"]
    finally:
        compat.install(registry.connectors())
    listed = {f"{p.cls.__name__}.{p.method}" for p in compat.PATCHES}
    assert set(_patched_pyspark_methods()) == listed


def test_another_pyspark_version_is_refused_with_a_code() -> None:
    with pytest.raises(ConfigError, match="written for pyspark 4.3") as caught:
        compat.check_version("4.4.0")
    assert code_of(caught.value) == "PYSPARK_VERSION"
    compat.check_version("4.3.1")


class _OptionsSeen(DataSource):
    """A stream sink that writes the options Spark hands it to the file named by ``record``
    (it runs in a Python worker, not in the test's process)."""

    @classmethod
    def name(cls) -> str:
        return "lakefeed_test_options_seen"

    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamWriter:  # noqa: ANN001
        seen = {k.lower(): v for k, v in self.options.items()}
        Path(seen["record"]).write_text(json.dumps(seen))
        return _Discard()


class _Discard(DataSourceStreamWriter):
    def write(self, iterator):  # noqa: ANN001, ANN201
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages, batchId) -> None:  # noqa: ANN001, N803
        pass


def test_a_non_delta_writer_is_left_as_spark_made_it(spark, tmp_path: Path) -> None:
    spark.dataSource.register(_OptionsSeen)
    source, record = str(tmp_path / "source"), tmp_path / "options.json"
    delta.write(spark.range(4).selectExpr("id", "id % 2 AS p"), source)
    query = (
        delta.read_stream(spark, source)
        .writeStream.format(_OptionsSeen.name())
        .partitionBy("p")
        .option("record", str(record))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    # Spark drops partitionBy for a Python sink; nothing of lakefeed's is added to its options
    assert set(json.loads(record.read_text())) == {"record", "checkpointlocation"}
    out = tmp_path / "parquet"
    spark.range(4).selectExpr("id", "id % 2 AS p").write.partitionBy("p").parquet(str(out))
    assert sorted(p.name for p in out.glob("p=*")) == ["p=0", "p=1"]
    # partitionBy before format("delta") still reaches a Delta table as its partitioning
    table = str(tmp_path / "delta")
    spark.range(4).selectExpr("id", "id % 2 AS p").write.partitionBy("p").format("delta").save(
        table
    )
    assert DeltaTable(table).metadata().partition_columns == ["p"]


def test_delta_tables_by_name_are_written_and_read_at_their_folder(spark, tmp_path: Path) -> None:
    """No metastore: ``saveAsTable``/``toTable``/``table`` on Delta use the folder
    ``DeltaTable.forName`` resolves a name to; names Spark's catalog knows stay Spark's."""
    from lakefeed.compat.delta_spark.tables import LAKEHOUSE_CONF
    from lakefeed.core.lakehouse import Lakehouse

    spark.conf.set(LAKEHOUSE_CONF, str(tmp_path / "lh"))
    try:
        house = Lakehouse.at(tmp_path / "lh")
        spark.range(3).write.format("delta").saveAsTable("events")
        spark.range(2).write.format("delta").mode("append").saveAsTable("default.events")
        with pytest.raises(Exception) as exists:
            spark.range(1).write.format("delta").saveAsTable("events")
        assert code_of(exists.value) == "DELTA_TABLE_EXISTS"
        assert DeltaTable(str(house.table_path("events"))).to_pyarrow_table().num_rows == 5
        assert spark.table("events").count() == 5 and spark.read.table("events").count() == 5
        query = (
            spark.readStream.table("events")
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .toTable("copied")
        )
        query.awaitTermination(240)
        assert sorted(r.id for r in spark.table("copied").collect()) == [0, 0, 1, 1, 2]
        spark.range(7).createOrReplaceTempView("events")  # the catalog's name wins
        assert spark.table("events").count() == 7
        spark.catalog.dropTempView("events")
    finally:
        spark.conf.unset(LAKEHOUSE_CONF)
