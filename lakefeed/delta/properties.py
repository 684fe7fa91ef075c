"""The ``delta.`` table properties Delta knows, and refusing the ones it does not.

Delta reserves the ``delta.`` prefix: delta-spark refuses a key there it does not know
(``DELTA_UNKNOWN_CONFIGURATION``), so a typo such as ``delta.appendOnyl`` fails the
``CREATE TABLE``. lakefeed writes properties through delta-rs, which checks fewer keys, so the
pipeline checks them itself when it loads, before anything starts. Other keys are the user's.
Keys compare in any case, as Delta's do. The list is Delta's table properties reference
(https://docs.delta.io/table-properties) plus the protocol's ``delta.feature.<name>``.

Properties that would change the table's protocol in a way lakefeed cannot keep working with
(``delta.feature.*``, versions delta-rs would record without acting on) are refused here too
(:func:`check_protocol`), for a pipeline's tables and delta-spark's table builder alike; the
features ``addFeatureSupport`` cannot add are :data:`REFUSED`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import NoReturn

from deltalake import TableFeatures

from lakefeed.core.errors import ConfigError
from lakefeed.delta.errors import BAD_FEATURE, UNSUPPORTED, DeltaOperationError
from lakefeed.delta.errors import UNKNOWN_CONFIGURATION as UNKNOWN

KNOWN = (
    "delta.appendOnly",
    "delta.autoOptimize.autoCompact",
    "delta.autoOptimize.optimizeWrite",
    "delta.checkpoint.writeStatsAsJson",
    "delta.checkpoint.writeStatsAsStruct",
    "delta.checkpointInterval",
    "delta.checkpointPolicy",
    "delta.columnMapping.mode",
    "delta.compatibility.symlinkFormatManifest.enabled",
    "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns",
    "delta.deletedFileRetentionDuration",
    "delta.enableChangeDataFeed",
    "delta.enableDeletionVectors",
    "delta.enableExpiredLogCleanup",
    "delta.enableIcebergCompatV2",
    "delta.enableRowTracking",
    "delta.enableTypeWidening",
    "delta.isolationLevel",
    "delta.logRetentionDuration",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
    "delta.randomizeFilePrefixes",
    "delta.randomPrefixLength",
    "delta.setTransactionRetentionDuration",
    "delta.targetFileSize",
    "delta.tuneFileSizesForRewrites",
    "delta.universalFormat.enabledFormats",
)
FEATURE_PREFIX = "delta.feature."
_BY_LOWER = {key.lower(): key for key in KNOWN}


def check(table: str, properties: Mapping[str, str]) -> None:
    """Refuse the ``delta.`` keys of ``properties`` Delta does not know, naming the closest."""
    unknown = [key for key in properties if _unknown(key)]
    if not unknown:
        return
    close = [  # closest first
        _BY_LOWER[match]
        for key in unknown
        for match in difflib.get_close_matches(key.lower(), _BY_LOWER, n=2, cutoff=0.7)
    ]
    hint = f"did you mean {', '.join(dict.fromkeys(close))}? " if close else ""
    raise ConfigError(
        f"table {table!r}: unknown Delta table propert{'y' if len(unknown) == 1 else 'ies'} "
        f"{', '.join(sorted(unknown))} (Delta refuses unknown keys under 'delta.')",
        fix=f"{hint}keys under 'delta.' must be Delta's ({', '.join(KNOWN[:3])}, ...: "
        "https://docs.delta.io/table-properties); name your own without the 'delta.' prefix",
        code=UNKNOWN,
    )


def _unknown(key: str) -> bool:
    lower = key.lower()
    if not lower.startswith("delta.") or lower.startswith(FEATURE_PREFIX):
        return False
    return lower not in _BY_LOWER


# -- the protocol a table's properties ask for ------------------------------------------------

# Legacy writer versions lakefeed takes a table to; 6 implies identity columns, which delta-rs
# then refuses to write (checked: "Unsupported table features required: [IdentityColumns]").
MAX_LEGACY_WRITER = 5
# Delta's feature names (PROTOCOL.md) to delta-rs's, for the features lakefeed keeps working with
# (each checked: added by delta-rs, then appended to and deleted from by delta-rs).
FEATURES = {
    "appendOnly": TableFeatures.AppendOnly,
    "invariants": TableFeatures.Invariants,
    "checkConstraints": TableFeatures.CheckConstraints,
    "changeDataFeed": TableFeatures.ChangeDataFeed,
    "generatedColumns": TableFeatures.GeneratedColumns,
    "timestampNtz": TableFeatures.TimestampWithoutTimezone,
    "deletionVectors": TableFeatures.DeletionVectors,
    "columnMapping": TableFeatures.ColumnMapping,
}
REFUSED = {
    "rowTracking": "lakefeed adds it only with the property that turns it on "
    "(delta.enableRowTracking=true), which also gives the files already there row ids",
    "identityColumns": "delta-rs cannot write to a table with this feature",
    "domainMetadata": "lakefeed adds it only with liquid clustering (clusterBy, CLUSTER BY)",
    "v2Checkpoint": "delta-rs writes no V2 checkpoints",
}
MAPPING_MODE = "delta.columnmapping.mode"
MAPPING_MODES = ("none", "name", "id")
"""Column mapping's property and modes: lakefeed writes all three (:mod:`.alter`)."""
_VERSION_LIMITS = {"delta.minreaderversion": 2, "delta.minwriterversion": MAX_LEGACY_WRITER}


def refuse_feature(name: str, context: str = "") -> NoReturn:
    """Refuse table feature ``name``: one lakefeed cannot keep working with, or none Delta has."""
    if name in REFUSED:
        raise DeltaOperationError(
            f"{context}table feature {name!r} is not supported by lakefeed: {REFUSED[name]}",
            fix="leave the feature off; tables with it need Spark with delta-spark",
            code=UNSUPPORTED,
        )
    raise DeltaOperationError(
        f"unsupported table feature {name!r}",
        fix=f"use one of Delta's feature names lakefeed supports: {', '.join(FEATURES)}",
        code=BAD_FEATURE,
    )


def check_protocol(table: str, properties: Mapping[str, str]) -> None:
    """Refuse table properties delta-rs would record without acting on (``delta.feature.*``,
    versions above (2, 5)), and column mapping modes Delta does not have."""
    for key, value in properties.items():
        lower, setting = key.lower(), value.strip().lower()
        if lower == MAPPING_MODE and setting not in MAPPING_MODES:
            raise DeltaOperationError(
                f"table {table!r}: {key}={value} is not a column mapping mode",
                fix=f"use one of {', '.join(MAPPING_MODES)}",
                code=UNSUPPORTED,
            )
        if lower.startswith(FEATURE_PREFIX) or (
            lower in _VERSION_LIMITS and setting.isdigit() and int(setting) > _VERSION_LIMITS[lower]
        ):
            raise DeltaOperationError(
                f"table {table!r}: property {key}={value} is not supported by lakefeed here "
                "(delta-rs would record it without changing the protocol as Delta does)",
                fix="create the table without it, then call addFeatureSupport(name) or "
                "upgradeTableProtocol(reader, writer)",
                code=UNSUPPORTED,
            )
