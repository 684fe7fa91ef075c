"""Any exception a run can end with, turned into one message a user can act on.

What reaches the driver when something fails is rarely the error itself: a Py4J error wrapping a
JVM stack of a hundred lines, a ``StreamingQueryException`` whose text holds a Python worker's
traceback, or pyspark's captured exceptions with a JVM trace appended. The useful part is in
there — lakefeed's own message (found by its ``[LAKEFEED:CODE]`` mark, kept whole, with its
fix), the last Python exception line and the pipeline file's line that raised it, or Spark's own
error condition — and :func:`explain` digs it out. A failure of the storage itself (an I/O
error, a full disk, an object store's 5xx, as the OS, delta-rs or the JVM report it) carries no
code of its own: it is given ``STORAGE_FAILED`` (transient) and its fix. The CLI prints
``Failure.message`` (the full trace only with ``--debug``); the runner puts it in
``flow_failed`` events and decides on ``Failure.permanent`` whether a restart can help.
"""

from __future__ import annotations

import errno
import os
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

from lakefeed.core import errors

_MARK = re.compile(r"\[LAKEFEED:[A-Z][A-Z0-9_]*\]")
# Where a message embedded in a trace ends: a stack frame, a blank line, the next exception.
_END = re.compile(
    r"^\s*$|^\s+at |^\s*\.\.\. \d+ more|^Caused by:|^JVM stacktrace:|^=== Streaming Query"
    r"|^Traceback \(most recent call last\)|^During handling|^The above exception"
    r"|^\s*File \"|^\t|^\s*SQLSTATE: |^An error occurred while calling "
)
_SQLSTATE = re.compile(r"\s*SQLSTATE: (?P<state>[0-9A-Z]{5})\.?\s*$")
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')
_PY_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<what>[A-Za-z_]\w*(?:Error|Exception|Exit)\b.*)$")
_JAVA_RAISED = re.compile(
    r"^(?:Caused by: )?(?:[a-z_]\w*\.)+(?P<cls>[A-Z]\w*)(?::\s*(?P<msg>.*))?$"
)
_CONDITION = re.compile(r"^\[(?P<condition>[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_CONDITIONS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_STATE = re.compile(r"SQLSTATE: (?P<state>[0-9A-Z]{5})")
_PREAMBLE = re.compile(r"^An error occurred while calling [\w.]+\.?\s*$")
# A storage failure, as each layer reports it. The OS: these errnos (not a missing file or a
# permission, which a retry cannot fix). delta-rs: object_store's "Generic <store> error" (its
# I/O failures; "not found" and the like have their own words). The JVM: Spark's SQLSTATE 58030
# (I/O error: a state store or checkpoint log write), S3A's answers of a failing store, or an
# IOException with one of the errnos' texts (not any IOException: a Python worker that cannot
# start or a reset socket is one too).
_STORAGE_ERRNOS = frozenset(
    {errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ESTALE, errno.ENOTCONN}
)
_PY_ERRNO = re.compile(r"^(?:OSError|IOError): \[Errno (?P<errno>\d+)\]")
_RS_STORAGE = re.compile(r"^(?:OSError: )?Generic \w+ error\b")
_JVM_STORAGE = re.compile(
    r"^(?:Caused by: )?(?:java\.io\.(?:Unchecked)?IOException: .*(?:"
    + "|".join(re.escape(os.strerror(code)) for code in sorted(_STORAGE_ERRNOS))
    + r")|org\.apache\.hadoop\.fs\.s3a\.AWS(?:Status5\d\d|ServiceIO|ClientIO|ServiceThrottled)"
    r"Exception\b)",
    re.MULTILINE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
STORAGE_FIX = (
    "nothing after the last committed batch was lost: once the storage works again (space, "
    "health, the object store's status), run again; it goes on from there"
)
# Spark's SQLSTATE classes no retry can fix: 42 (the query does not analyze: a missing column,
# an output mode the query cannot have), 0A (not supported), 22 (data exceptions).
_PERMANENT_STATES = ("42", "0A", "22")
# lakefeed's own frames too: the whole package, not just lakefeed/core where this file lives.
_LIBRARY = ("site-packages", "dist-packages", "/pyspark/", "/py4j/", str(Path(__file__).parents[1]))


@dataclass(frozen=True)
class Failure:
    """What failed, as a user should read it; ``trace`` is everything, for ``--debug``."""

    message: str
    code: str | None = None
    permanent: bool | None = None
    where: str | None = None
    trace: str = ""

    def __str__(self) -> str:
        return f"{self.message} (at {self.where})" if self.where else self.message


def explain(error: BaseException) -> Failure:
    """One clear message for ``error`` (see the module docstring), with its code and trace."""
    text = errors._text(error)  # with its causes
    trace = "".join(traceback.format_exception(error)) + _jvm_trace(error)
    code = errors.code_of(error) or errors.code_of(text)
    own = str(error) if isinstance(error, errors.LakefeedError) else _lakefeed_message(text)
    where = getattr(error, "where", None) or _where(error, text)
    if own is not None:
        return Failure(readable(own), code, errors.is_permanent(own), where, trace)
    python = _python_exception(text) if "Traceback (most recent call last)" in text else None
    state = _sql_state(error, text)
    storage = _storage_failure(error, text, python, state)
    if storage is not None:
        return Failure(readable(str(storage)), storage.code, False, where, trace)
    permanent = True if state and state.startswith(_PERMANENT_STATES) else None
    return Failure(
        python or _plain(error, text),
        _condition(error, text),
        permanent,
        where,
        trace,
    )


# --- the parts ---------------------------------------------------------------------------------


def _storage_failure(
    error: BaseException, text: str, python: str | None, state: str | None
) -> errors.StorageFailedError | None:
    """``error`` as a coded storage failure when it is one (see ``_STORAGE_ERRNOS``), else None:
    a Python OSError raised here or in a worker's traceback, or a JVM I/O error."""
    raised = _os_error(error)
    if raised is not None:
        detail = f"{type(raised).__name__}: {raised}"
    elif python is not None:
        detail = python if _storage_errno(python) or _RS_STORAGE.match(python) else ""
    elif state == "58030" or _JVM_STORAGE.search(text):
        detail = _plain(error, text)
    else:
        detail = ""
    if not detail:
        return None
    return errors.StorageFailedError(
        "the storage failed while the run wrote or read its tables, checkpoints or state: "
        + " ".join(_ANSI.sub("", detail).split()),
        fix=STORAGE_FIX,
    )


def _os_error(error: BaseException) -> OSError | None:
    """The storage OSError in ``error``'s chain (raised on this side, not in a worker)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and (
            current.errno in _STORAGE_ERRNOS
            or (current.errno is None and _RS_STORAGE.match(str(current)))
        ):
            return current
        current = current.__cause__ or current.__context__
    return None


def _storage_errno(line: str) -> bool:
    """Whether a worker's exception line is an OSError with a storage errno."""
    found = _PY_ERRNO.match(line)
    return found is not None and int(found.group("errno")) in _STORAGE_ERRNOS


def _jvm_trace(error: BaseException) -> str:
    trace = getattr(error, "getStackTrace", None)
    try:
        text = trace() if callable(trace) else None
    except Exception:  # a stopped JVM: the Python side is all there is
        return ""
    return f"\nJVM stacktrace:\n{text}" if isinstance(text, str) and text else ""


def _lakefeed_message(text: str) -> str | None:
    """The first lakefeed message in a trace, whole (all its lines, its fix)."""
    found = _MARK.search(text)
    if found is None:
        return None
    lines = text[found.start() :].splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        if _END.match(line) or _JAVA_RAISED.match(line.strip()):
            break
        kept.append(line)
    return _SQLSTATE.sub("", "\n".join(kept)).rstrip()


def readable(text: str) -> str:
    """``[LAKEFEED:CODE] msg`` reads as ``msg [CODE]``: the code stays, at the end."""
    found = _MARK.search(text)
    if found is None:
        return text
    code = found.group(0)[len("[LAKEFEED:") : -1]
    rest = (text[: found.start()] + text[found.end() :].lstrip()).strip()
    return f"{rest} [{code}]"


def _python_exception(text: str) -> str | None:
    """The last exception line of the last Python traceback in ``text``."""
    tail = text[text.rindex("Traceback (most recent call last)") :].splitlines()[1:]
    raised = None
    for line in tail:
        if _PY_FRAME.match(line) or line.startswith((" ", "\t")):
            if raised is not None:
                break
            continue
        match = _PY_RAISED.match(line.strip())
        if match is not None:
            raised = match.group("what")
        elif raised is not None:
            break
    return _SQLSTATE.sub("", raised).rstrip() if raised else None


def _where(error: BaseException, text: str) -> str | None:
    """``file:line`` of the innermost frame in user code (not pyspark, py4j or lakefeed)."""
    frames = [(f.filename, f.lineno) for f in traceback.extract_tb(error.__traceback__)]
    frames += [(m["file"], int(m["line"])) for m in map(_PY_FRAME.match, text.splitlines()) if m]
    user = [(file, line) for file, line in frames if not _library(file)]
    return f"{user[-1][0]}:{user[-1][1]}" if user else None


def _library(file: str) -> bool:
    return file.startswith("<") or any(part in file for part in _LIBRARY) or "/lib/python3" in file


def _plain(error: BaseException, text: str) -> str:
    """A JVM or Python error without a Python traceback: its first meaningful line(s), up to
    Spark's SQLSTATE (what follows is the plan and query context)."""
    state = _STATE.search(text)
    text = text[: state.end()] if state else text
    lines = [line for line in text.splitlines() if not _PREAMBLE.match(line.strip())]
    kept: list[str] = []
    for line in lines:
        if kept and (_END.match(line) or _JAVA_RAISED.match(line.strip())):
            break
        if not kept and not line.strip():
            continue
        kept.append(line.strip().lstrip(": "))
    if not kept:
        return type(error).__name__
    first = _JAVA_RAISED.match(kept[0])
    if first is not None and first.group("msg"):
        message = first.group("msg")
        kept[0] = message if _CONDITION.match(message) else f"{first.group('cls')}: {message}"
    elif not _CONDITION.match(kept[0]):
        kept[0] = f"{type(error).__name__}: {kept[0]}"
    return _SQLSTATE.sub("", " ".join(kept)).rstrip()


def _condition(error: BaseException, text: str) -> str | None:
    """Spark's error condition of the innermost error: the last one named before the first
    SQLSTATE (``[STREAM_FAILED] ... [PYTHON_EXCEPTION] ... SQLSTATE: 38000``)."""
    state = _STATE.search(text)
    found = _CONDITIONS.findall(text[: state.start()] if state else text)
    return found[-1] if found else _getter(error, "getCondition")


def _sql_state(error: BaseException, text: str) -> str | None:
    """The innermost error's SQLSTATE (Spark prints it first; the wrapper's comes after)."""
    found = _STATE.search(text)
    return found.group("state") if found else _getter(error, "getSqlState")


def _getter(error: BaseException, name: str) -> str | None:
    getter = getattr(error, name, None)
    value = getter() if callable(getter) else None
    return value if isinstance(value, str) and value else None
