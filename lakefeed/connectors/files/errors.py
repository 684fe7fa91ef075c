"""The files connector's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import OptionError as LakefeedOptionError
from lakefeed.core.errors import SourceError


class OptionError(LakefeedOptionError):
    """A misuse caught before the stream starts; the message says what to do."""

    code = "FILES_OPTION"


class GlobError(LakefeedOptionError):
    """A glob that cannot be compiled (unbalanced ``{`` or ``[``)."""

    code = "GLOB"


class NewColumnsError(SourceError):
    """A file brought columns the schema does not have (addNewColumns / failOnNewColumns)."""

    code = "NEW_COLUMNS"


class SchemaEvolvedError(NewColumnsError):
    """addNewColumns recorded the new columns: a restart ingests them (Auto Loader's way)."""

    code = "SCHEMA_EVOLVED"
    permanent = False


class BadRecordsError(SourceError):
    """Values did not fit the schema and there is no rescued-data column to keep them."""

    code = "BAD_RECORDS"


class UnreadableFileError(SourceError):
    """A file could not be read at all (corrupt, truncated, vanished)."""

    code = "UNREADABLE_FILE"
