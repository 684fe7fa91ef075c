"""The catalog and database a pipeline's datasets live in, and what a table name means there.

Spark Declarative Pipelines' ``spark-pipeline.yml`` may set ``catalog`` and ``database``: the
pipeline's datasets are then those of that database, and a name resolves as Spark resolves one
against its current catalog and database — ``orders``, ``sales.orders`` and
``main.sales.orders`` are the same dataset of a pipeline whose database is ``sales`` in catalog
``main``. In lakefeed one pipeline's datasets are one lakehouse's tables, so the lakehouse is
that database: a name of it is its table, and a name qualified with another database (or
catalog) is not the pipeline's — it reads that other table, and the pipeline cannot define it.

Without a spec's settings a pipeline's database is Spark's ``default`` in ``spark_catalog``.
Names compare without regard to case, as Spark's identifiers do. Spark-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline.errors import OTHER_DATABASE
from lakefeed.sql.tokens import tokens

DEFAULT_CATALOG = "spark_catalog"
DEFAULT_DATABASE = "default"


def name_parts(name: str) -> list[str] | None:
    """The parts of a dotted, maybe backquoted, table name; None when it is not one."""
    found = tokens(name)
    parts = [t.value for t in found[::2]]
    names = all(t.kind in ("word", "quoted") for t in found[::2])
    dots = all(t.text == "." for t in found[1::2])
    return parts if found and names and dots and len(found) % 2 == 1 else None


@dataclass(frozen=True)
class Namespace:
    """The catalog and database of a pipeline's datasets (see the module doc)."""

    catalog: str = DEFAULT_CATALOG
    database: str = DEFAULT_DATABASE

    def local(self, name: str) -> str | None:
        """The dataset name ``name`` gives in this database (``x``, ``db.x``, ``cat.db.x``
        and DLT's ``LIVE.x``); None when it names another database's table, or no table."""
        parts = name_parts(name)
        if parts is None or len(parts) > 3:
            return None
        qualifier = [p.lower() for p in parts[:-1]]
        ours = [self.catalog.lower(), self.database.lower()]
        if qualifier == ["live"] or qualifier == ours[len(ours) - len(qualifier) :]:
            return parts[-1]
        return None

    def own(self, name: str, where: str) -> str:
        """The dataset name a definition (``@dp.table(name=...)``) gives; a name of another
        database is refused: this pipeline's tables are its lakehouse's, one database."""
        local = self.local(name)
        if local is None:
            raise PipelineDefinitionError(
                f"{where}: dataset {name!r} is not in the pipeline's database "
                f"{self.catalog}.{self.database}; lakefeed keeps a pipeline's datasets in its "
                "own lakehouse, one database",
                fix=f"name it without a qualifier, or as {self.database}.<name>; define a "
                "table of another database in a pipeline whose spark-pipeline.yml sets that "
                "database (and catalog), with its own lakehouse",
                code=OTHER_DATABASE,
            )
        return local
