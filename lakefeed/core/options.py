"""Connector options as Spark hands them: looked up in any case, read into typed values.

Spark's options are case-insensitive, and what a data source receives shows it: ``dict(options)``
of Spark's mapping lower-cases every key, so a lookup of ``"maxFilesPerTrigger"`` in it finds
nothing, silently. Every connector (Kafka, cloudFiles, the generator, Delta) therefore reads its
options through one :class:`Options`, which looks names up in any case and turns text into typed
values with one wording for every misuse: the option, the value it got and what it accepts.
Each connector still parses its options once into its own typed object (``SourceOptions``,
``FileSourceOptions``, ``IotConfig``, ...); this is the one place that reads the text.

    opts = Options(self.options, error=KafkaOptionError)
    opts.flag("failOnDataLoss", True)              # "true"/"false", any case
    opts.positive_int("maxOffsetsPerTrigger")      # None when unset
    opts.byte_size("maxBytesPerTrigger")           # "10m", "1g", "1048576"
    opts.duration("backfillInterval")              # "5 seconds", "1 minute", "2h" -> seconds
    opts.choice("cleanSource", ("OFF", "DELETE", "MOVE"), "OFF")
    opts.names_list("subscribe")                   # "a, b,c" -> ["a", "b", "c"]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn, overload

from lakefeed.core.errors import OptionError

_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?")
_SECONDS = {
    **dict.fromkeys(("us", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 604800.0),
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_bytes(raw: str) -> int | None:
    """Bytes in a size as Spark writes them (``1048576``, ``512k``, ``10m``, ``1.5g``, ``1gb``),
    None when the text is not a positive size."""
    match = _SIZE.fullmatch(raw.strip().lower())
    if match is None:
        return None
    value = int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])
    return value if value > 0 else None


def parse_duration(raw: str) -> float | None:
    """Seconds in a duration as Spark writes them (``5 seconds``, ``1 minute``, ``100ms``,
    ``1 hour 30 minutes``, ``interval 2 days``), None when the text is not one."""
    text = raw.strip().lower().removeprefix("interval").strip()
    parts = _PART.findall(text)
    if not parts or _PART.sub("", text).strip():
        return None
    if any(unit not in _SECONDS for _, unit in parts):
        return None
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


Choices = Sequence[str] | Mapping[str, str]
"""The values a choice accepts, or each value mapped to what it means (shown in errors)."""


def _allowed(choices: Choices) -> str:
    """What a choice accepts: each value with its meaning when given, else the values."""
    if isinstance(choices, Mapping):
        meant = [f"{value} ({meaning})" for value, meaning in choices.items()]
        head = ", ".join(meant[:-1])
        return "must be " + (f"{head} or " if head else "") + meant[-1]
    quoted = [repr(c) for c in choices]
    if len(quoted) == 2:
        return f"is {quoted[0]} or {quoted[1]}"
    return "must be one of " + ", ".join(quoted)


class Options(Mapping[str, str]):
    """Spark-style options: names in any case (iterated lower-cased, as Spark hands them),
    ``None`` values left out, typed getters that raise ``error`` naming the option."""

    def __init__(
        self, options: Mapping[str, Any] | None, error: type[OptionError] = OptionError
    ) -> None:
        self.error = error
        self._values: dict[str, str] = {}
        self._given: dict[str, str] = {}
        for key, value in (options or {}).items():
            if value is not None:
                self._values[str(key).lower()] = str(value)
                self._given[str(key).lower()] = str(key)

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Options({sorted(self._values)})"  # names only: values may be secrets

    def given(self, name: str) -> str:
        """The name as the caller spelt it (for messages about options lakefeed does not know)."""
        return self._given.get(name.lower(), name)

    def fail(self, name: str, raw: str, expected: str) -> NoReturn:
        """Raise ``error``: option ``name`` got ``raw`` and ``expected`` says what it takes."""
        raise self.error(f"option {name} {expected}, got {raw!r}")

    # --- typed getters: None (a choice: its default) when the option is not set ----------------

    def flag(self, name: str, default: bool = False) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value not in ("true", "false"):
            self.fail(name, raw, "must be true or false")
        return value == "true"

    def integer(self, name: str) -> int | None:
        raw = self.get(name)
        if raw is None:
            return None
        try:
            return int(raw.strip())
        except ValueError:
            self.fail(name, raw, "must be an integer")

    def positive_int(self, name: str) -> int | None:
        raw = self.get(name)
        if raw is None:
            return None
        if not raw.strip().isdigit() or int(raw) <= 0:
            self.fail(name, raw, "must be a positive integer")
        return int(raw)

    def non_negative_int(self, name: str) -> int | None:
        raw = self.get(name)
        if raw is None:
            return None
        if not raw.strip().isdigit():
            self.fail(name, raw, "must be an integer >= 0")
        return int(raw)

    def number(self, name: str) -> float | None:
        raw = self.get(name)
        if raw is None:
            return None
        try:
            value = float(raw.strip())
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            self.fail(name, raw, "must be a finite number")
        return value

    def byte_size(self, name: str) -> int | None:
        raw = self.get(name)
        if raw is None:
            return None
        value = parse_bytes(raw)
        if value is None:
            self.fail(name, raw, "must be a positive size in bytes like 1048576, 512k, 10m or 1g")
        return value

    def duration(self, name: str) -> float | None:
        """Seconds."""
        raw = self.get(name)
        if raw is None:
            return None
        value = parse_duration(raw)
        if value is None:
            self.fail(name, raw, "must be a duration like '5 seconds', '1 minute' or '100ms'")
        return value

    @overload
    def choice(self, name: str, choices: Choices) -> str | None: ...

    @overload
    def choice(self, name: str, choices: Choices, default: str) -> str: ...

    def choice(self, name: str, choices: Choices, default: str | None = None) -> str | None:
        """One of ``choices`` (or of its keys, each mapped to what it means) in any case,
        returned as ``choices`` spells it."""
        raw = self.get(name)
        if raw is None:
            return default
        for allowed in choices:
            if raw.strip().lower() == allowed.lower():
                return allowed
        shown = _allowed(choices) + (f" (default {default!r})" if default is not None else "")
        self.fail(name, raw, shown)

    def names_list(self, name: str) -> list[str]:
        """A comma-separated list, blanks dropped (empty when unset)."""
        return [part.strip() for part in (self.get(name) or "").split(",") if part.strip()]
