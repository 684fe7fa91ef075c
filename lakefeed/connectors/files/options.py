"""``cloudFiles.*`` options: parsed once, validated before the query starts.

Names follow Databricks Auto Loader (``cloudFiles.format``, ``cloudFiles.schemaLocation``, ...)
and Spark's file source (``pathGlobFilter``, ``recursiveFileLookup``, ``header``, ``sep``, ...)
so existing code runs unchanged. A misspelt ``cloudFiles.*`` option is refused: silently
ignoring ``cloudFiles.maxFilePerTrigger`` would turn a throttled stream into an unthrottled one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakefeed.connectors.files.errors import OptionError
from lakefeed.connectors.files.globs import GLOB_CHARS, GlobError, PathMatcher
from lakefeed.core import storage
from lakefeed.core.options import Options
from lakefeed.core.storage import is_object_store

FORMATS = ("json", "csv", "parquet")
EVOLUTION_MODES = ("addNewColumns", "rescue", "failOnNewColumns", "none")
CLEAN_MODES = ("OFF", "DELETE", "MOVE")
DEFAULT_RESCUE_COLUMN = "_rescued_data"
DEFAULT_MAX_FILES = 1000
SAMPLE_FILES = "cloudFiles.schemaInference.sampleSize.numFiles"

# Databricks options that only tune cloud notification services or validation: accepted and
# ignored, so notebooks run unchanged on a plain folder (useNotifications only when false).
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


def auto_loader_name(name: str) -> str:
    """``cloudFiles.<name>`` for an Auto Loader option named without its prefix (as SQL's
    ``read_files`` names them: ``schemaHints``, ``inferColumnTypes``, ...); other names (reader
    options: ``header``, ``sep``, ...) as they are."""
    prefixed = f"cloudFiles.{name}"
    return prefixed if prefixed.lower() in _KNOWN else name


def local_path(raw: str) -> str:
    """An absolute local path: tasks may run with another working directory than the driver."""
    text = raw.removeprefix("file://") if raw.startswith("file:///") else raw.removeprefix("file:")
    if "://" in text:
        raise OptionError(
            f"{raw!r}: lakefeed's cloudFiles reads local or mounted folders and s3:// / s3a:// "
            "URIs only"
        )
    return str(Path(text).expanduser().resolve())


def location(raw: str) -> str:
    """A landing folder, schema location or archive folder as every process can reach it: an
    ``s3://`` / ``s3a://`` URI as given (without a trailing ``/``), else an absolute path."""
    if not is_object_store(raw):
        return local_path(raw)
    bucket = raw.split("://", 1)[1].split("/", 1)[0]
    if not bucket or GLOB_CHARS.search(bucket):
        raise OptionError(f"{raw!r}: an object-store location needs a bucket (no glob in it)")
    return raw.rstrip("/")


@dataclass(frozen=True)
class FileSourceOptions(storage.CarriesSettings):
    """Everything the source, the schema logic and the file readers need to agree on.

    Hadoop settings among the options (``fs.s3a.access.key``..., as Spark's file sources take
    them) serve the landing folder, the schema location and the move destination: registered
    for each (:mod:`lakefeed.core.storage`) wherever these options travel, and given to Spark's
    reader of the landed files."""

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
    hadoop: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> FileSourceOptions:
        opts = Options(options, OptionError)
        unknown = sorted(k for k in opts if k.startswith("cloudfiles.") and k not in _KNOWN)
        if unknown:
            raise OptionError(
                f"unsupported option(s) {unknown}; lakefeed's cloudFiles supports: "
                + ", ".join(sorted(k for k in _KNOWN if k not in _IGNORED))
            )
        if opts.flag("cloudFiles.useNotifications", False):
            raise OptionError(
                "cloudFiles.useNotifications=true: lakefeed has no file notification mode (no "
                "SQS/SNS or Event Grid queue); it discovers new files by listing incrementally",
                fix="drop cloudFiles.useNotifications (or set it to false): directory listing "
                "finds the same files",
            )
        path = opts.get("path")
        if not path:
            raise OptionError("cloudFiles needs a folder: .load('/path/to/landing')")
        fmt = opts.choice("cloudFiles.format", FORMATS)
        if fmt is None:
            raise OptionError(
                f"option cloudFiles.format must be one of {', '.join(FORMATS)} (it is required)"
            )
        mode = opts.choice("cloudFiles.schemaEvolutionMode", EVOLUTION_MODES)
        clean = opts.choice("cloudFiles.cleanSource", CLEAN_MODES, "OFF")
        move_to = opts.get("cloudfiles.cleansource.movedestination")
        if clean == "MOVE" and not move_to:
            raise OptionError(
                "cloudFiles.cleanSource=MOVE needs cloudFiles.cleanSource.moveDestination"
            )
        for ignored in ("cloudFiles.backfillInterval", "cloudFiles.cleanSource.retentionDuration"):
            opts.duration(ignored)  # ignored here, but a typo in it is still refused
        rescue = opts.get("rescueddatacolumn")
        schema_at = opts.get("cloudfiles.schemalocation")
        source = location(path)
        glob = opts.get("pathglobfilter")
        # Auto Loader always discovers files in sub-folders; Spark's option can turn it off.
        recursive = opts.flag("recursiveFileLookup", True)
        try:
            matcher = PathMatcher.of(source, glob, recursive)
        except GlobError as error:
            raise OptionError(f"{error} (load path or pathGlobFilter)") from None
        hadoop = storage.hadoop_options(options)
        places = [matcher.base, *(location(p) for p in (schema_at, move_to) if p)]
        for place in places:
            storage.register(place, hadoop)
        parsed = cls(
            path=source,
            format=fmt,
            schema_location=location(schema_at) if schema_at else None,
            max_files_per_trigger=opts.positive_int("cloudFiles.maxFilesPerTrigger"),
            max_bytes_per_trigger=opts.byte_size("cloudFiles.maxBytesPerTrigger"),
            include_existing_files=opts.flag("cloudFiles.includeExistingFiles", True),
            path_glob_filter=glob,
            recursive=recursive,
            schema_hints=opts.get("cloudfiles.schemahints"),
            infer_column_types=opts.flag("cloudFiles.inferColumnTypes", fmt == "parquet"),
            evolution_mode=mode,
            rescued_data_column=rescue or (DEFAULT_RESCUE_COLUMN if mode == "rescue" else None),
            sample_files=opts.positive_int(SAMPLE_FILES) or 1000,
            ignore_corrupt_files=opts.flag("ignoreCorruptFiles"),
            ignore_missing_files=opts.flag("ignoreMissingFiles"),
            clean_source=clean,
            move_destination=location(move_to) if move_to else None,
            include_metadata=opts.flag("includeMetadata", True),
            header=opts.flag("header"),
            sep=opts.get("sep", opts.get("delimiter", ",")),
            quote=opts.get("quote", '"'),
            escape=opts.get("escape"),
            multi_line=opts.flag("multiLine"),
            schema_ddl=opts.get("lakefeed.schema"),
            matcher=matcher,
            hadoop=hadoop,
        )
        parsed.carry(*places)
        return parsed

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
    raw = Options(options, OptionError).get("cloudFiles.schemaLocation")
    return location(raw) if raw else None
