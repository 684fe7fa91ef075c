"""``cloudFiles.*`` options: parsed once, validated before the query starts.

Names follow Databricks Auto Loader (``cloudFiles.format``, ``cloudFiles.schemaLocation``, ...)
and Spark's file source (``pathGlobFilter``, ``recursiveFileLookup``, ``header``, ``sep``, ...)
so existing code runs unchanged. A misspelt ``cloudFiles.*`` option is refused: silently
ignoring ``cloudFiles.maxFilePerTrigger`` would turn a throttled stream into an unthrottled one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakefeed import errors
from lakefeed.connectors.files.globs import GlobError, PathMatcher

FORMATS = ("json", "csv", "parquet")
EVOLUTION_MODES = ("addNewColumns", "rescue", "failOnNewColumns", "none")
CLEAN_MODES = ("OFF", "DELETE", "MOVE")
DEFAULT_RESCUE_COLUMN = "_rescued_data"
DEFAULT_MAX_FILES = 1000

# Databricks options that only tune cloud notification services or validation: accepted and
# ignored, so notebooks run unchanged on a plain folder.
_IGNORED = {
    "cloudfiles.usenotifications",
    "cloudfiles.validateoptions",
    "cloudfiles.region",
    "cloudfiles.usestrictglobber",
    "cloudfiles.useincrementallisting",
    "cloudfiles.backfillinterval",
    "cloudfiles.cleansource.retentionduration",
    "cloudfiles.schemainference.samplesize.numbytes",
}
_KNOWN = {
    "cloudfiles.format",
    "cloudfiles.schemalocation",
    "cloudfiles.maxfilespertrigger",
    "cloudfiles.maxbytespertrigger",
    "cloudfiles.includeexistingfiles",
    "cloudfiles.schemahints",
    "cloudfiles.infercolumntypes",
    "cloudfiles.schemaevolutionmode",
    "cloudfiles.schemainference.samplesize.numfiles",
    "cloudfiles.cleansource",
    "cloudfiles.cleansource.movedestination",
} | _IGNORED


class OptionError(errors.OptionError):
    """A misuse caught before the stream starts; the message says what to do."""

    code = "FILES_OPTION"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark hands a case-insensitive mapping; dict() of it already lowercases, but a plain dict
    # from a test or read_files() may not.
    return {str(k).lower(): str(v) for k, v in options.items()}


def local_path(raw: str) -> str:
    """An absolute local path: tasks may run with another working directory than the driver."""
    text = raw.removeprefix("file://") if raw.startswith("file:///") else raw.removeprefix("file:")
    if "://" in text:
        raise OptionError(f"{raw!r}: lakefeed's cloudFiles reads local or mounted folders only")
    return str(Path(text).expanduser().resolve())


def _bool(opts: dict[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {key} must be true or false, got {raw!r}")
    return value == "true"


def _positive_int(opts: dict[str, str], key: str) -> int | None:
    raw = opts.get(key.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {key} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {key} must be a positive integer, got {raw!r}")
    return value


_BYTE_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_bytes(raw: str) -> int:
    """``"10g"``, ``"512m"``, ``"1048576"`` → bytes, as Auto Loader reads maxBytesPerTrigger."""
    text = raw.strip().lower().removesuffix("b") or "0"
    unit = 1
    if text[-1] in _BYTE_UNITS:
        unit, text = _BYTE_UNITS[text[-1]], text[:-1]
    try:
        value = int(float(text) * unit)
    except ValueError:
        raise OptionError(f"cannot read a byte size from {raw!r}; use e.g. 10g, 512m") from None
    if value <= 0:
        raise OptionError(f"byte size must be positive, got {raw!r}")
    return value


@dataclass(frozen=True)
class FileSourceOptions:
    """Everything the source, the schema logic and the file readers need to agree on."""

    path: str
    format: str
    schema_location: str | None
    max_files_per_trigger: int | None
    max_bytes_per_trigger: int | None
    include_existing_files: bool
    path_glob_filter: str | None
    recursive: bool
    schema_hints: str | None
    infer_column_types: bool
    evolution_mode: str | None
    rescued_data_column: str | None
    sample_files: int
    ignore_corrupt_files: bool
    ignore_missing_files: bool
    clean_source: str
    move_destination: str | None
    include_metadata: bool
    header: bool
    sep: str
    quote: str
    escape: str | None
    multi_line: bool
    schema_ddl: str | None
    matcher: PathMatcher

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> FileSourceOptions:
        opts = _lower(options)
        unknown = sorted(k for k in opts if k.startswith("cloudfiles.") and k not in _KNOWN)
        if unknown:
            raise OptionError(
                f"unsupported option(s) {unknown}; lakefeed's cloudFiles supports: "
                + ", ".join(sorted(k for k in _KNOWN if k not in _IGNORED))
            )
        path = opts.get("path")
        if not path:
            raise OptionError("cloudFiles needs a folder: .load('/path/to/landing')")
        fmt = opts.get("cloudfiles.format", "").lower()
        if fmt not in FORMATS:
            raise OptionError(
                f"option cloudFiles.format must be one of {', '.join(FORMATS)}, got {fmt!r}"
            )
        mode = _evolution_mode(opts.get("cloudfiles.schemaevolutionmode"))
        clean = opts.get("cloudfiles.cleansource", "OFF").upper()
        if clean not in CLEAN_MODES:
            raise OptionError(
                f"option cloudFiles.cleanSource must be OFF, DELETE or MOVE, got {clean!r}"
            )
        move_to = opts.get("cloudfiles.cleansource.movedestination")
        if clean == "MOVE" and not move_to:
            raise OptionError(
                "cloudFiles.cleanSource=MOVE needs cloudFiles.cleanSource.moveDestination"
            )
        max_bytes = opts.get("cloudfiles.maxbytespertrigger")
        rescue = opts.get("rescueddatacolumn")
        location = opts.get("cloudfiles.schemalocation")
        source = local_path(path)
        glob = opts.get("pathglobfilter")
        # Auto Loader always discovers files in sub-folders; Spark's option can turn it off.
        recursive = _bool(opts, "recursiveFileLookup", True)
        try:
            matcher = PathMatcher.of(source, glob, recursive)
        except GlobError as error:
            raise OptionError(f"{error} (load path or pathGlobFilter)") from None
        return cls(
            path=source,
            format=fmt,
            schema_location=local_path(location) if location else None,
            max_files_per_trigger=_positive_int(opts, "cloudFiles.maxFilesPerTrigger"),
            max_bytes_per_trigger=parse_bytes(max_bytes) if max_bytes else None,
            include_existing_files=_bool(opts, "cloudFiles.includeExistingFiles", True),
            path_glob_filter=glob,
            recursive=recursive,
            schema_hints=opts.get("cloudfiles.schemahints"),
            infer_column_types=_bool(opts, "cloudFiles.inferColumnTypes", fmt == "parquet"),
            evolution_mode=mode,
            rescued_data_column=rescue or (DEFAULT_RESCUE_COLUMN if mode == "rescue" else None),
            sample_files=_positive_int(opts, "cloudFiles.schemaInference.sampleSize.numFiles")
            or 1000,
            ignore_corrupt_files=_bool(opts, "ignoreCorruptFiles", False),
            ignore_missing_files=_bool(opts, "ignoreMissingFiles", False),
            clean_source=clean,
            move_destination=local_path(move_to) if move_to else None,
            include_metadata=_bool(opts, "includeMetadata", True),
            header=_bool(opts, "header", False),
            sep=opts.get("sep", opts.get("delimiter", ",")),
            quote=opts.get("quote", '"'),
            escape=opts.get("escape"),
            multi_line=_bool(opts, "multiLine", False),
            schema_ddl=opts.get("lakefeed.schema"),
            matcher=matcher,
        )

    def require_schema_location(self) -> str:
        if not self.schema_location:
            raise OptionError(
                "cloudFiles needs option cloudFiles.schemaLocation (a folder): lakefeed keeps the "
                "inferred schema versions and the log of discovered files there, because Spark "
                "does not tell a Python source its checkpoint. Use one folder per stream; "
                "inside a lakefeed pipeline read_files() sets it for you."
            )
        return self.schema_location


def schema_location_of(options: Mapping[str, str]) -> str | None:
    """The absolute ``cloudFiles.schemaLocation`` of a source's options, if set."""
    raw = _lower(options).get("cloudfiles.schemalocation")
    return local_path(raw) if raw else None


def _evolution_mode(raw: str | None) -> str | None:
    if raw is None:
        return None
    for mode in EVOLUTION_MODES:
        if raw.strip().lower() == mode.lower():
            return mode
    raise OptionError(
        f"option cloudFiles.schemaEvolutionMode must be one of {', '.join(EVOLUTION_MODES)}, "
        f"got {raw!r}"
    )
