"""The Spark layer's codes (making a session, a cluster, Spark Connect, the S3A jars, Spark's
checkpoint files), registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import CheckpointError, ConfigError, register_code

# a standalone cluster (cluster.py)
CLUSTER_UNREACHABLE = register_code("CLUSTER_UNREACHABLE", ConfigError)
EXECUTORS_LACK = register_code("CLUSTER_EXECUTORS_LACK", ConfigError)
BAD_SPARK_CONF = register_code("SPARK_CONF", ConfigError)
# Spark Connect (connect.py)
CONNECT_UNREACHABLE = register_code("CONNECT_UNREACHABLE", ConfigError)
BOTH_TARGETS = register_code("CONNECT_AND_MASTER", ConfigError)
MISSING_CLIENT = register_code("CONNECT_CLIENT_MISSING", ConfigError)
# S3A (s3a.py) and Spark's checkpoint files (checkpoint_files.py)
JARS_UNAVAILABLE = register_code("S3A_JARS_UNAVAILABLE", ConfigError)
CHECKPOINT_CORRUPT = register_code("CHECKPOINT_CORRUPT", CheckpointError)
