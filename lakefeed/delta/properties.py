"""The ``delta.`` table properties Delta knows, and refusing the ones it does not.

Delta reserves the ``delta.`` prefix: delta-spark refuses a key there it does not know
(``DELTA_UNKNOWN_CONFIGURATION``), so a typo such as ``delta.appendOnyl`` fails the
``CREATE TABLE``. lakefeed writes properties through delta-rs, which checks fewer keys, so the
pipeline checks them itself when it loads, before anything starts. Other keys are the user's.
Keys compare in any case, as Delta's do. The list is Delta's table properties reference
(https://docs.delta.io/table-properties) plus the protocol's ``delta.feature.<name>``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from lakefeed.core.errors import ConfigError
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
