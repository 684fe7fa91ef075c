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
