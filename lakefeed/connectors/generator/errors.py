"""The generator connector's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import OptionError


class GeneratorOptionError(OptionError):
    """An option of the ``lakefeed_iot`` source is unknown or invalid."""

    code = "GENERATOR_OPTION"
