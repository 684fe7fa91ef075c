"""Patching Spark's Python readers and writers so unchanged user code reaches lakefeed.

Spark's ``DataFrameReader``/``DataStreamReader``/writers keep their format and options in the
JVM and never hand them back; lakefeed's patches (``delta.compat`` for writes,
``jvm.readers`` for reads) need them in Python, so these wrappers record them as they are set.
Wrapping is idempotent: each method is wrapped once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_MARK = "_lakefeed_wrapped"


def wrap(cls: type, name: str, make: Callable[[Callable], Callable]) -> None:
    """Replace ``cls.name`` by ``make(original)``, once: installing again changes nothing."""
    original = getattr(cls, name)
    if getattr(original, _MARK, False):
        return
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _MARK, True)
    setattr(cls, name, wrapped)


def remember(attribute: str) -> Callable[[Callable], Callable]:
    """A wrapper keeping the method's (lower-cased) argument, e.g. the format, as ``attribute``."""

    def make(original: Callable) -> Callable:
        def remember(self: Any, value: Any = None, *args: Any, **kwargs: Any) -> Any:
            setattr(self, attribute, str(value).lower() if value is not None else None)
            return original(self, value, *args, **kwargs)

        return remember

    return make


def record_option(original: Callable) -> Callable:
    """``option(key, value)`` that also keeps the option in :func:`recorded`."""

    def record(self: Any, key: str, value: Any) -> Any:
        recorded(self)[str(key)] = text(value)
        return original(self, key, value)

    return record


def record_options(original: Callable) -> Callable:
    """``options(**kv)`` that also keeps the options in :func:`recorded`."""

    def record(self: Any, **options: Any) -> Any:
        recorded(self).update({k: text(v) for k, v in options.items()})
        return original(self, **options)

    return record


def recorded(target: Any) -> dict[str, str]:
    """The options set so far on a reader or writer, as text."""
    if not hasattr(target, "_lakefeed_options"):
        target._lakefeed_options = {}
    return target._lakefeed_options


def text(value: Any) -> str:
    """An option value as Spark turns it into text (booleans lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
