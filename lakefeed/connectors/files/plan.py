"""What a task needs to turn files into rows, kept apart from the readers.

Spark imports this module in every Python process that plans a query (the data source lookup,
the long-lived stream runner, the read planner); the readers' pyarrow compute/JSON/CSV/Parquet
modules are imported only where files are read, which takes about 0.1 s (more under load) off
each of those processes' start and so off each streaming query's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructField, StructType

from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.connectors.files.pushdown import NONE, Pushdown
from lakefeed.connectors.files.schemas import output_schema


@dataclass(frozen=True)
class ReadPlan:
    """What every task needs to turn a file into rows: shipped to executors with the reader."""

    opts: FileSourceOptions
    data_schema: StructType
    evolution_mode: str
    rescue_column: str | None
    include_metadata: bool
    schema_location: str
    pushdown: Pushdown = NONE
    """The columns the flow reads and the row filters it applies (lakefeed's Arrow reader in a
    planned stream, see :mod:`~lakefeed.connectors.files.pushdown`); nothing narrowed else."""

    @cached_property
    def output(self) -> StructType:
        return output_schema(self.data_schema, self.rescue_column, self.include_metadata)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return to_arrow_schema(self.output, timezone="UTC")

    @cached_property
    def fields(self) -> dict[str, StructField]:
        return {f.name: f for f in self.data_schema.fields}

    @cached_property
    def lower_names(self) -> set[str]:
        return {name.lower() for name in self.fields}

    @property
    def rescue_unknown(self) -> bool:
        # In "none" mode new columns are dropped unless the user asked for a rescued column.
        return self.rescue_column is not None and self.evolution_mode in ("rescue", "none")

    def arrow_type(self, name: str) -> pa.DataType:
        return self.arrow_schema.field(name).type

    def wants(self, name: str) -> bool:
        """Whether the flow reads output column ``name``."""
        return self.pushdown.columns is None or name in self.pushdown.columns

    @cached_property
    def kept(self) -> StructType:
        """The output columns a batch carries: those the flow reads."""
        return StructType([f for f in self.output.fields if self.wants(f.name)])

    @cached_property
    def kept_arrow(self) -> pa.Schema:
        return to_arrow_schema(self.kept, timezone="UTC")

    @property
    def parse_all(self) -> bool:
        """Whether every field of a record must be parsed: to rescue unknown or mistyped
        values into a rescued-data column the flow reads, or to find new columns for schema
        evolution. Else fields the flow does not read are skipped unparsed."""
        return (
            self.pushdown.columns is None
            or (self.rescue_column is not None and self.wants(self.rescue_column))
            or self.evolution_mode in ("addNewColumns", "failOnNewColumns")
        )

    @cached_property
    def parsed(self) -> tuple[str, ...]:
        """The data columns read from files."""
        return tuple(n for n in self.fields if self.parse_all or self.wants(n))

    def parses(self, name: str) -> bool:
        """Whether a file's field ``name`` is read: a parsed column or a variant of one in
        case (which, as ever, is rescued or fails the batch, never silently dropped)."""
        return self.parse_all or name.lower() in self._parsed_lower

    @cached_property
    def _parsed_lower(self) -> set[str]:
        return {name.lower() for name in self.parsed}
