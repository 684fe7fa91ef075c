"""The pipeline model's errors and codes, registered once here and imported where they are
raised (the base classes are :mod:`lakefeed.core.errors`'s)."""

from __future__ import annotations

from collections.abc import Iterable

from lakefeed.core.errors import (
    CheckpointError,
    ConfigError,
    DataLossRiskError,
    PipelineDefinitionError,
    register_code,
)


class PipelineError(PipelineDefinitionError):
    """A pipeline that cannot run as written; ``problems`` lists every issue found."""

    def __init__(self, problems: Iterable[str], *, fix: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(f"- {p}" for p in self.problems), fix=fix)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.problems,))


class SqlQueryError(PipelineDefinitionError):
    """Spark refused a SQL flow's query: fix the statement at the file and line the message
    names (``where``: the file's line, not the statement's)."""

    code = "SQL_QUERY"

    def __init__(self, message: str, *, where: str, fix: str | None = None) -> None:
        self.where = where
        super().__init__(message, fix=fix)

    def __reduce__(self) -> tuple[object, ...]:
        return (_sql_error, (self.message, self.where, self.fix))


def _sql_error(message: str, where: str, fix: str | None) -> SqlQueryError:
    return SqlQueryError(message, where=where, fix=fix)


class GuardError(CheckpointError):
    """A checkpoint/target pairing that would lose or duplicate data."""

    code = "CHECKPOINT_GUARD"


# loading a pipeline (loader.py, spec.py, table_schema.py)
NO_SESSION = register_code("PIPELINE_NO_SESSION", ConfigError)
FIXED_CONF = register_code("PIPELINE_CONF_FIXED", ConfigError)
SPEC_INVALID = register_code("SPEC_INVALID", PipelineDefinitionError)
SCHEMA_INVALID = register_code("SCHEMA_INVALID", PipelineDefinitionError)
OTHER_DATABASE = register_code("PIPELINE_OTHER_DATABASE", PipelineDefinitionError)  # names.py
# the checkpoint guard (guard.py)
FOREIGN = register_code("CHECKPOINT_FOREIGN", GuardError)
OTHER_FLOW = register_code("CHECKPOINT_OTHER_FLOW", GuardError)
MISSING = register_code("CHECKPOINT_MISSING", GuardError)
STATE_CHANGED = register_code("CHECKPOINT_STATE_CHANGED", GuardError)
TABLE_BEHIND = register_code(
    "TABLE_BEHIND",
    DataLossRiskError,
    "A table is behind what a reading flow's checkpoint recorded of it (e.g. restored from "
    "an older backup): going on would skip rows.",
)
SOURCE_RESET = register_code("SOURCE_RESET", DataLossRiskError)
# sinks as declared (sinks.py)
SINK_FORMAT = register_code(
    "SINK_FORMAT", PipelineDefinitionError, "A sink's format is one lakefeed reads, not writes."
)
SINK_OPTION = register_code(
    "SINK_OPTION", ConfigError, "A sink's options are refused by the connector writing it."
)
SINK_READ = register_code(
    "SINK_READ",
    PipelineDefinitionError,
    "A flow reads a sink: a sink's rows leave the pipeline and are never read back.",
)
SINK_FLOW = register_code("SINK_FLOW", PipelineDefinitionError)
# tables and SQL as declared (api.py, table_paths.py, sql.py)
TABLE_PATH_INVALID = register_code(
    "TABLE_PATH_INVALID",
    PipelineDefinitionError,
    "a table's path= is not an absolute path or a URI",
)
TABLE_PATH_MOVED = register_code(
    "TABLE_PATH_MOVED",
    ConfigError,
    "a table's declared location differs from where its data already is",
)
CLUSTERING_UNSUPPORTED = register_code(
    "CLUSTERING_UNSUPPORTED",
    PipelineDefinitionError,
    "a table declared CLUSTER BY AUTO / cluster_by_auto=True: lakefeed cannot choose clustering "
    "columns (name them: CLUSTER BY (col, ...), cluster_by=[...])",
)
