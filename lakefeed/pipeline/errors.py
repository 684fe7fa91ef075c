"""The pipeline model's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError, PipelineDefinitionError, register_code

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
    "a table declared clustered (CLUSTER BY, cluster_by=): lakefeed cannot write clustered tables",
)
READ_FILES_UNSUPPORTED = register_code(
    "SQL_READ_FILES_UNSUPPORTED",
    PipelineDefinitionError,
    "a SQL flow reads files with read_files()/cloud_files(), which lakefeed's SQL does not run",
)
