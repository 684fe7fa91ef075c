"""Every setting lakefeed reads, declared once: its key, where it is given, type, default, meaning.

A reader takes the key from here (``RETENTION_KEY = EVENT_LOG_RETENTION.key``) rather than
spelling it again, the configuration reference (docs/reference/configuration.md) is generated
from :data:`SETTINGS`, and a test scans lakefeed's source for ``"lakefeed.…"`` keys and
``LAKEFEED_…`` variables missing here, so the page cannot drift from the code.

Where a setting is given (:class:`Kind`):

- ``conf``: the pipeline configuration (``lakefeed run --conf key=value``, ``conf={...}``,
  ``configuration`` in ``spark-pipeline.yml``);
- ``spark``: the Spark session (``lakefeed run --spark-conf key=value``, ``spark.conf.set``);
- ``option``: an option of one read or write (``.option(key, value)``);
- ``env``: an environment variable;
- ``commit``: a field lakefeed writes into a Delta commit's ``commitInfo`` (read back on restart);
- ``internal``: a key lakefeed passes between its own parts; never set it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """Where a setting is given; the value is the heading of its section in the reference."""

    CONF = "Pipeline configuration"
    SPARK = "Spark session settings"
    OPTION = "Read and write options"
    ENV = "Environment variables"
    COMMIT = "Fields lakefeed writes into commitInfo"
    INTERNAL = "Keys lakefeed sets itself"


@dataclass(frozen=True)
class Setting:
    """One setting. ``default`` is what applies when it is not given (None: nothing, or the
    engine's own default as ``meaning`` says); ``doc`` a docs page (from docs/) that says more."""

    key: str
    kind: Kind
    type: str
    meaning: str
    default: str | None = None
    doc: str | None = None


SETTINGS: dict[str, Setting] = {}


def _add(
    key: str,
    kind: Kind,
    type: str,
    meaning: str,
    default: str | None = None,
    doc: str | None = None,
) -> Setting:
    if key in SETTINGS:
        raise ValueError(f"setting {key} declared twice")
    SETTINGS[key] = setting = Setting(key, kind, type, meaning, default, doc)
    return setting


def registered(key: str) -> bool:
    """Whether ``key`` (or, ending in ``.``, a prefix of keys) is a declared setting."""
    return key in SETTINGS or (key.endswith(".") and any(k.startswith(key) for k in SETTINGS))


_STATE = "how-to/state.md#bound-state-memory"

# --- the pipeline configuration -------------------------------------------------------------
STATE_MEMORY = _add(
    "lakefeed.state.memory",
    Kind.CONF,
    "size or `off`",
    "one RocksDB cache shared by all state stores of an executor (bounds state memory)",
    default="Spark's (unbounded)",
    doc=_STATE,
)
STATE_WRITE_BUFFER_RATIO = _add(
    "lakefeed.state.writeBufferRatio",
    Kind.CONF,
    "0–1",
    "the memtables' share of `lakefeed.state.memory`",
    default="0.5",
    doc=_STATE,
)
STATE_HIGH_PRIORITY_RATIO = _add(
    "lakefeed.state.highPriorityRatio",
    Kind.CONF,
    "0–1",
    "the index and filter blocks' share of `lakefeed.state.memory`",
    default="0.1",
    doc=_STATE,
)
STATE_WRITE_BUFFER_SIZE = _add(
    "lakefeed.state.writeBufferSize",
    Kind.CONF,
    "size",
    "the size of one memtable",
    default="Spark's (64m)",
    doc=_STATE,
)
STATE_MAX_WRITE_BUFFERS = _add(
    "lakefeed.state.maxWriteBuffers",
    Kind.CONF,
    "integer",
    "memtables per RocksDB instance",
    default="Spark's",
    doc=_STATE,
)
STATE_BLOCK_CACHE_SIZE = _add(
    "lakefeed.state.blockCacheSize",
    Kind.CONF,
    "size",
    "each RocksDB instance's own cache, when `lakefeed.state.memory` is not set",
    default="Spark's",
    doc=_STATE,
)
EVENT_LOG_RETENTION = _add(
    "lakefeed.eventLog.retention",
    Kind.CONF,
    "duration",
    'drop events older than this, e.g. `"7 days"`',
    default="unset: no age limit",
    doc="concepts/event-log.md",
)
EVENT_LOG_MAX_EVENTS = _add(
    "lakefeed.eventLog.maxEvents",
    Kind.CONF,
    "integer",
    "keep at most this many events",
    default="unset: no count limit",
    doc="concepts/event-log.md",
)

# --- the Spark session ----------------------------------------------------------------------
LAKEHOUSE = _add(
    "lakefeed.lakehouse",
    Kind.SPARK,
    "path",
    "the lakehouse folder where `DeltaTable.forName` and Delta SQL look up table names outside "
    "a pipeline",
    default="unset: `spark.sql.warehouse.dir`",
    doc="how-to/delta.md",
)
_AUTO_COMPACT = "spark.databricks.delta.autoCompact."
AUTO_COMPACT_MIN_FILES = _add(
    _AUTO_COMPACT + "minNumFiles",
    Kind.SPARK,
    "integer",
    "small files in a partition that trigger auto compaction",
    default="50",
)
AUTO_COMPACT_MAX_SIZE = _add(
    _AUTO_COMPACT + "maxFileSize",
    Kind.SPARK,
    "size",
    "auto compaction's target file size",
    default="128m",
)
AUTO_COMPACT_MIN_SIZE = _add(
    _AUTO_COMPACT + "minFileSize",
    Kind.SPARK,
    "size",
    "files smaller than this count as small",
    default="half the target",
)
AUTO_MERGE = _add(
    "spark.databricks.delta.schema.autoMerge.enabled",
    Kind.SPARK,
    "boolean",
    "acts as `mergeSchema` on every Delta write",
    default="false",
    doc="delta-writes.md",
)
TXN_APP_ID = _add(
    "spark.databricks.delta.write.txnAppId",
    Kind.SPARK,
    "string",
    "with `txnVersion`: an idempotent write, skipped when this app id already committed this "
    "version (as Delta documents)",
)
TXN_VERSION = _add(
    "spark.databricks.delta.write.txnVersion",
    Kind.SPARK,
    "integer",
    "the version of an idempotent write (with `txnAppId`)",
)
TXN_AUTO_RESET = _add(
    "spark.databricks.delta.write.txnVersion.autoReset.enabled",
    Kind.SPARK,
    "boolean",
    "unset `txnAppId` and `txnVersion` after each write",
    default="false",
)
RETENTION_CHECK = _add(
    "spark.databricks.delta.retentionDurationCheck.enabled",
    Kind.SPARK,
    "boolean",
    "`false` allows `vacuum` with a retention below 168 hours",
    default="true",
)

# --- options of one read or write -----------------------------------------------------------
READER = _add(
    "lakefeed.reader",
    Kind.OPTION,
    "`spark` or `python`; on `cloudFiles` also `arrow`",
    "on `delta` and `cloudFiles` sources: which reader reads the files (`arrow`: lakefeed's "
    "Arrow reader parsing only the columns the flow reads, pushed-down filters applied)",
    default="`spark` where lakefeed's JVM planner loads",
)
WRITER = _add(
    "lakefeed.writer",
    Kind.OPTION,
    "`spark` or `python`",
    "on the `delta` sink: `python` writes through the Python Data Source sink instead of "
    "Spark's Parquet writer",
    default="`spark`; `python` on object storage when Spark would stage the files",
    doc="delta-writes.md",
)
DELIVERY_GUARANTEE = _add(
    "lakefeed.deliveryGuarantee",
    Kind.OPTION,
    "`at-least-once` or `exactly-once`",
    "on the Kafka sink: `exactly-once` produces each micro-batch in one Kafka transaction",
    default="at-least-once",
    doc="sinks.md",
)
TRANSACTIONAL_ID_PREFIX = _add(
    "lakefeed.transactionalIdPrefix",
    Kind.OPTION,
    "string",
    "on the exactly-once Kafka sink: the prefix of its transactional ids",
    default="lakefeed-",
    doc="sinks.md",
)
CONTROL_TOPIC = _add(
    "lakefeed.controlTopic",
    Kind.OPTION,
    "topic",
    "on the exactly-once Kafka sink: the compacted topic of its commit markers",
    default="_lakefeed_kafka_sink_commits",
    doc="sinks.md",
)
CONTROL_TOPIC_WAIT = _add(
    "lakefeed.controlTopicWaitMs",
    Kind.OPTION,
    "milliseconds",
    "on the exactly-once Kafka sink: how long the replay check waits for other producers' "
    "open transactions",
    default="120000",
    doc="sinks.md",
)

# --- environment variables ------------------------------------------------------------------
LAKEHOUSE_ENV = _add(
    "LAKEFEED_LAKEHOUSE",
    Kind.ENV,
    "path",
    "the lakehouse folder of `lakefeed ui`, `status`, `events` and the other commands that "
    "read one",
    default="`lakehouse` (in the working directory)",
)
UI_TOKEN_ENV = _add(
    "LAKEFEED_UI_TOKEN",
    Kind.ENV,
    "string (16+ characters)",
    "the web UI's access token (`lakefeed ui`, `lakefeed run --ui`)",
    doc="how-to/monitoring.md",
)
KAFKA_BOOTSTRAP_ENV = _add(
    "LAKEFEED_KAFKA_BOOTSTRAP",
    Kind.ENV,
    "host:port,…",
    "the Kafka brokers of `lakefeed kafka …`",
)
for _name, _meaning in {
    "SPARK_HOME": "set it to use that Spark instead of lakefeed's pyspark mirror",
    "SPARK_REMOTE": "the Spark Connect server, when no `--master` or `--remote` is given",
    "JAVA_HOME": "the JDK Spark starts",
    "AWS_ENDPOINT_URL": "S3: the endpoint (also `AWS_ENDPOINT_URL_S3`)",
    "AWS_REGION": "S3: the region (also `AWS_DEFAULT_REGION`)",
    "AWS_ACCESS_KEY_ID": "S3: the access key (with `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`)",
    "PGPASSWORD": "the PostgreSQL password (or `~/.pgpass`)",
}.items():
    _add(_name, Kind.ENV, "", _meaning, doc="cluster.md" if "AWS" in _name else None)

# --- commitInfo -----------------------------------------------------------------------------
for _key, _meaning in {
    "lakefeed.queryId": "the streaming query that wrote the commit",
    "lakefeed.batchId": "its micro-batch",
    "lakefeed.sourceOffsets": "a hash of the batch's source offsets: a replayed batch over other "
    "offsets is refused (`CHECKPOINT_BEHIND_TABLE`)",
}.items():
    _add(_key, Kind.COMMIT, "string", _meaning, doc="concepts/exactly-once.md")

# --- internal -------------------------------------------------------------------------------
for _key, _meaning in {
    "lakefeed.planner": "the session's stream planner a planned read belongs to",
    "lakefeed.planner.reader": "the reader a planned stream opens",
    "lakefeed.planner.description": "what a planned scan shows in plans",
    "lakefeed.direct.token": "marks a Spark write lakefeed commits itself",
    "lakefeed.direct.prefix": "the staging folder of such a write",
    "lakefeed.fileLogEnd": "`lakefeed verify`: read a file stream's first N logged files",
    "lakefeed.schema": "the `schema` given to `lf.read_files`",
    "lakefeed.debug": "`lakefeed --debug` on the command's context",
}.items():
    _add(_key, Kind.INTERNAL, "", _meaning)
