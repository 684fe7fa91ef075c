"""A pipeline's configuration is its own: a pipeline run later in the same process (a notebook,
a test suite, a scheduler running several projects) does not see what an earlier one set with
``conf=`` or its spec's ``configuration``."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakefeed as lf
from tests.pipeline.support import table, write

SPEC = (
    "name: {name}\nstorage: {storage}\n{configuration}"
    "libraries:\n  - glob:\n      include: transformations/**\n"
)
READS = (
    "import lakefeed as lf\n\n"
    "REGION = lf.config('shop.region', 'unset')\n\n"
    "@lf.materialized_view\n"
    "def region():\n"
    "    return spark.createDataFrame([(REGION,)], 'region STRING')\n"
)


def _project(root: Path, name: str, configuration: str = "") -> Path:
    storage = (root / "storage" / name).as_uri()
    spec = SPEC.format(name=name, storage=storage, configuration=configuration)
    return write(root / name, {"spark-pipeline.yml": spec, "transformations/p.py": READS})


@pytest.mark.spark
def test_a_later_pipeline_does_not_inherit_an_earlier_ones_configuration(
    spark, tmp_path: Path
) -> None:
    first = _project(tmp_path, "first", "configuration:\n  shop.region: north\n")
    second = _project(tmp_path, "second")

    def region(project: Path, **conf: str) -> str:
        lakehouse = tmp_path / "lakehouses" / f"{project.name}-{len(conf)}"
        ran = lf.run(project, lakehouse=lakehouse, spark=spark, mode="backfill", conf=conf or None)
        assert ran.ok, ran
        return table(lf.Lakehouse.at(lakehouse), "region").column("region")[0].as_py()

    assert region(first) == "north"
    assert region(second) == "unset"  # not the first project's spec configuration
    assert region(second, **{"shop.region": "south"}) == "south"
    assert region(second) == "unset"  # not the previous run's conf=


SETS = (
    "import lakefeed as lf\n\n"
    "spark.conf.set('spark.sql.lakefeedTest.setByCode', 'yes')\n\n"
    "@lf.materialized_view\n"
    "def partitions():\n"
    "    value = spark.conf.get('spark.sql.shuffle.partitions')\n"
    "    return spark.createDataFrame([(value,)], 'partitions STRING')\n"
)


@pytest.mark.spark
def test_a_runs_spark_confs_are_gone_from_a_shared_session_after_it(spark, tmp_path: Path) -> None:
    """The spec's ``spark.*`` configuration and a ``spark.conf.set`` in the pipeline's code hold
    during the run (the flow sees them) and are undone after ``lf.run`` and ``lf.validate``, as
    DLT's per-pipeline configuration never reaches the next pipeline of a shared session."""
    configuration = (
        "configuration:\n  spark.sql.shuffle.partitions: '7'\n  spark.sql.lakefeedTest.spec: x\n"
    )
    project = _project(tmp_path, "confs", configuration)
    (project / "transformations" / "p.py").write_text(SETS)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert before != "7"
    added = ("spark.sql.lakefeedTest.spec", "spark.sql.lakefeedTest.setByCode")

    lakehouse = tmp_path / "lakehouses" / "confs"
    ran = lf.run(project, lakehouse=lakehouse, spark=spark, mode="backfill")
    assert ran.ok, ran
    assert table(lf.Lakehouse.at(lakehouse), "partitions").column("partitions")[0].as_py() == "7"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert [spark.conf.get(key, None) for key in added] == [None, None]

    assert lf.validate(project, lakehouse=lakehouse, spark=spark).ok
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert [spark.conf.get(key, None) for key in added] == [None, None]
