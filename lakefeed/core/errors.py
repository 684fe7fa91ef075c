"""lakefeed's errors: one small tree, each error with a stable code and whether it is permanent.

Errors raised inside Spark (a data source's reader on an executor, a ``foreachBatch`` function)
reach the driver as Py4J/Spark exceptions whose only intact part is the message text. The code
therefore travels *in* the message as ``[LAKEFEED:CODE]``; :func:`code_of` finds it again in any
exception or text, and :func:`is_permanent` answers from the code, never from matched wording.

A permanent error (bad options, a checkpoint of another flow, a corrupt file) fails fast with its
fix; a transient one (a broker down, a commit conflict) is worth a retry with backoff.

Area subclasses also derive from the builtin a caller used to catch (``ValueError`` for bad
options, ``RuntimeError`` for run-time failures), so existing ``except ValueError`` code keeps
working.

This module holds the base tree and the registry; each area's own errors and codes live in the
area's ``errors.py`` (``lakefeed.delta.errors``, ...). A code is registered once: a second
registration raises :class:`DuplicateCodeError` at import, since which class a code read back out
of a message means must not depend on which module happened to load first.
"""

from __future__ import annotations

import re
from typing import ClassVar

_MARK = re.compile(r"\[LAKEFEED:([A-Z][A-Z0-9_]*)\]")

# Every code ever raised, to its class: a code read back out of a Py4J message says what it is.
_CODES: dict[str, type[LakefeedError]] = {}
_DESCRIPTIONS: dict[str, str] = {}  # what a code means, where its class's docstring does not say


class DuplicateCodeError(RuntimeError):
    """A code registered twice: a programming error, raised when the second module loads."""


class LakefeedError(Exception):
    """Base of every lakefeed error: a message, a stable ``code``, ``permanent``, and a ``fix``.

    Subclasses set ``code`` and ``permanent`` as class attributes; an instance may narrow the code
    (``OptionError("...", code="GENERATOR_OPTION")``) to one registered with :func:`register_code`.
    """

    code: ClassVar[str] = "ERROR"
    permanent: ClassVar[bool] = True

    def __init__(self, message: str, *, fix: str | None = None, code: str | None = None) -> None:
        self.message = message
        self.fix = fix
        if code is not None:
            self.code = code  # type: ignore[misc]
        super().__init__(self.__str__())

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _register(cls.code, cls)

    def __str__(self) -> str:
        text = f"[LAKEFEED:{self.code}] {self.message}"
        return f"{text} — fix: {self.fix}" if self.fix else text

    def __reduce__(self) -> tuple[object, ...]:
        # Errors cross process boundaries (Python workers): keep message, fix and code.
        return (_rebuild, (type(self), self.message, self.fix, self.code))


def _rebuild(cls: type[LakefeedError], message: str, fix: str | None, code: str) -> LakefeedError:
    return cls(message, fix=fix, code=code)


def _register(code: str, cls: type[LakefeedError]) -> None:
    known = _CODES.get(code)
    if known is not None:
        raise DuplicateCodeError(
            f"error code {code} is registered twice: to {known.__module__}.{known.__qualname__} "
            f"and to {cls.__module__}.{cls.__qualname__}; register it once, in its area's "
            "errors.py, and import it where it is raised"
        )
    _CODES[code] = cls


_register(LakefeedError.code, LakefeedError)


def register_code(code: str, cls: type[LakefeedError], description: str | None = None) -> str:
    """Declare an extra code raised with ``cls`` (so :func:`is_permanent` knows it) and what it
    means (the error reference shows it); returns it. Raises :class:`DuplicateCodeError` for a
    code already registered."""
    _register(code, cls)
    if description:
        _DESCRIPTIONS[code] = description
    return code


def registered() -> dict[str, type[LakefeedError]]:
    """Every code this process has registered, to its class (the error reference's source)."""
    return dict(_CODES)


def description(code: str) -> str | None:
    """What ``code`` means: the description it was registered with, else the docstring of the
    class that defines it; None when neither says (the reference then needs a raise site)."""
    if code in _DESCRIPTIONS:
        return _DESCRIPTIONS[code]
    cls = _CODES.get(code)
    own = cls is not None and cls.__dict__.get("code") == code
    return (cls.__doc__ or None) if own and cls is not None else None


def code_of(error: BaseException | str | None) -> str | None:
    """The lakefeed code of an error, also when it is only text inside a Py4J/Spark message."""
    if error is None:
        return None
    if isinstance(error, LakefeedError):
        return error.code
    found = _MARK.search(error if isinstance(error, str) else _text(error))
    return found.group(1) if found else None


def is_permanent(error: BaseException | str | None) -> bool | None:
    """Whether retrying cannot help: ``None`` when the error carries no lakefeed code, or one
    this process has not registered (its module never imported here): unknown, not permanent."""
    if isinstance(error, LakefeedError):
        return error.permanent
    code = code_of(error)
    cls = _CODES.get(code) if code is not None else None
    return None if cls is None else cls.permanent


def _text(error: BaseException) -> str:
    """An exception's text with its causes (Py4J puts the Java side in ``str``)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


# --- areas -------------------------------------------------------------------------------------


class ConfigError(LakefeedError, ValueError):
    """Bad options or settings: refused before a query starts."""

    code = "CONFIG"


class OptionError(ConfigError):
    """A connector option that is missing, unknown, or of the wrong type or range."""

    code = "OPTION"


class PipelineDefinitionError(LakefeedError, ValueError):
    """A pipeline that cannot be loaded or does not form a valid graph."""

    code = "PIPELINE"


class CheckpointError(LakefeedError, RuntimeError):
    """A checkpoint that does not fit the flow, the table, or itself (corrupt)."""

    code = "CHECKPOINT"


class DataLossRiskError(LakefeedError, RuntimeError):
    """Going on would lose or duplicate data silently (e.g. a table behind its checkpoint)."""

    code = "DATA_LOSS_RISK"


class DeltaError(LakefeedError, RuntimeError):
    """A Delta table that cannot be read or written as asked."""

    code = "DELTA"


class SourceError(LakefeedError, RuntimeError):
    """Input that cannot be read as asked (permanent: the input itself is wrong)."""

    code = "SOURCE"


class UnavailableError(LakefeedError, RuntimeError):
    """Something lakefeed talks to is not reachable now (a broker, a store): worth a retry."""

    code = "UNAVAILABLE"
    permanent = False


class ConflictError(LakefeedError, RuntimeError):
    """Another writer got there first (a commit race): worth a retry."""

    code = "CONFLICT"
    permanent = False


class LeaseError(LakefeedError, RuntimeError):
    """The lakehouse is held by another running pipeline."""

    code = "LEASE_HELD"


class EventLogError(LakefeedError, RuntimeError):
    """The event log cannot be read or written; it never changes a run's outcome."""

    code = "EVENT_LOG"


class ExpectationError(LakefeedError, RuntimeError):
    """An ``expect_or_fail`` rule failed: the same input fails the same way on a retry."""

    code = "EXPECTATION_FAILED"


class BatchInterruptedError(LakefeedError, RuntimeError):
    """A micro-batch cut short by its query's stop: nothing of it is committed, and the next
    start replays it (:mod:`lakefeed.spark.foreach_batch`)."""

    code = "BATCH_INTERRUPTED"
    permanent = False


class StorageFailedError(UnavailableError):
    """The storage failed under a run (an I/O error, a full disk, an object store's 5xx) while
    it wrote or read a table, a checkpoint or a state store: nothing after the last committed
    batch was lost, and a run after the storage recovers goes on from there."""

    code = "STORAGE_FAILED"


# --- codes raised with the classes above by core's own modules ----------------------------------

MANGLED_URI = register_code("STORAGE_MANGLED_URI", ConfigError)  # storage.py
NO_CONDITIONAL_WRITES = register_code(
    "STORAGE_NO_CONDITIONAL_WRITES",
    ConfigError,
    "A write that must create its files only if they are absent (a Delta commit lakefeed "
    "writes itself) on an object store that cannot: one without conditional PUT, declared so, "
    "or without boto3 to send it.",
)  # storage.py
