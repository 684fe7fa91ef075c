"""The one module that patches pyspark: what it wraps, that it can be taken out again, that it
refuses a pyspark it was not written for, and that it leaves other formats as Spark made them."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

from lakefeed.compat import patches as compat
from lakefeed.connectors import delta, registry
from lakefeed.core.errors import ConfigError, code_of

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "lakefeed").rglob("*.py"), *(ROOT / "delta").rglob("*.py")])


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _pyspark_imports(tree: ast.AST) -> list[object]:
    """The pyspark modules and classes a module imports (function-level imports too; each
    module of a dotted ``import pyspark.a.b``)."""
    found: list[object] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "pyspark":
                    found += [
                        importlib.import_module(".".join(parts[:i]))
                        for i in range(1, len(parts) + 1)
                    ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pyspark":
            module = importlib.import_module(node.module or "pyspark")
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if value is None:  # a submodule: from pyspark import daemon
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                found.append(value)
    return found


def _attributes(value: object) -> set[str]:
    """Public attributes of a pyspark module or class, and of the classes it holds
    (``SparkSession.Builder``'s ``getOrCreate``)."""
    names = {n for n in dir(value) if not n.startswith("_")}
    for name in list(names):
        inner = getattr(value, name, None)
        if inspect.isclass(inner) and (inner.__module__ or "").startswith("pyspark"):
            names |= {n for n in dir(inner) if not n.startswith("_")}
    return names


def _root(expr: ast.expr) -> str | None:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def patch_sites(source: str) -> set[str]:
    """Attributes of pyspark objects a module assigns (``X.attr = ...``, ``setattr(X, "attr",
    ...)``) where X is not ``self`` or its parts: the places a module could patch pyspark."""
    tree = ast.parse(source)
    imported = _pyspark_imports(tree)
    if not imported:
        return set()
    known = set().union(*(_attributes(value) for value in imported))
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                targets.extend(target.elts if isinstance(target, ast.Tuple) else [target])
        for target in targets:
            # an attribute of self (or of its parts) is an object's own state, not pyspark's
            attribute = isinstance(target, ast.Attribute) and target.attr in known
            if attribute and _root(target.value) != "self":
                found.add(target.attr)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and name.value in known:
                found.add(str(name.value))
            elif not isinstance(name, ast.Constant):
                found.add("<setattr>")
    return found


def _patched_pyspark_methods() -> list[str]:
    """Members marked as lakefeed's wrappers in every pyspark module lakefeed imports."""
    modules: set[str] = set()
    for path in SOURCES:
        for value in _pyspark_imports(ast.parse(path.read_text())):
            modules.add(value.__name__ if inspect.ismodule(value) else value.__module__)
    found = []
    for name in sorted(modules):
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for member_name, member in vars(cls).items():
                if getattr(member, "_lakefeed_wrapped", False) is True:  # py4j answers any name
                    found.append(f"{cls.__name__}.{member_name}")
    return sorted(set(found))


def test_every_pyspark_patch_is_a_row_of_the_table() -> None:
    """The census: a module that assigns an attribute of a pyspark object is the table's own
    or the one a row names as putting that attribute in; a new patch anywhere else fails."""
    declared = {(p.by, p.method) for p in compat.PATCHES if p.by != compat.__name__}
    found = {
        (_module(path), site)
        for path in SOURCES
        if _module(path) != compat.__name__
        for site in patch_sites(path.read_text())
    }
    assert found <= declared, sorted(found - declared)
    assert all(p.why and p.by for p in compat.PATCHES)


def test_the_census_finds_a_patch_wherever_it_is_written() -> None:
    assert patch_sites("from pyspark.sql import DataFrame\nDataFrame.withWatermark = f\n") == {
        "withWatermark"
    }
    looped = (
        "from pyspark.sql.readwriter import DataFrameReader\n"
        "for cls in (DataFrameReader,):\n    cls.table = f\n"
    )
    assert patch_sites(looped) == {"table"}
    assert patch_sites("import pyspark.daemon\nsetattr(pyspark.daemon, 'traceback', t)\n") == {
        "traceback"
    }
    assert patch_sites("from pyspark.sql import SparkSession\nb.getOrCreate = f\n") == {
        "getOrCreate"
    }
    assert patch_sites("x = 1\nobj.table = 2\n") == set()  # no pyspark imported


def test_the_table_lists_every_wrapped_method(spark) -> None:
    listed = {f"{p.cls.__name__}.{p.method}" for p in compat.INSTALLED}
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
    listed = {f"{p.cls.__name__}.{p.method}" for p in compat.INSTALLED}
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
