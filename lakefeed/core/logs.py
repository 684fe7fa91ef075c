"""Structured (JSON lines) logging with secrets masked, for every lakefeed component."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from lakefeed.core.redact import redact, redact_text

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; ``extra=`` fields become top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": redact_text(record.getMessage()),
        }
        payload.update(redact({k: v for k, v in record.__dict__.items() if k not in _RESERVED}))
        if record.exc_info:
            payload["exc"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(payload, default=str)


def configure_logging(level: str = "INFO", stream: Any = None) -> None:
    """Route the ``lakefeed`` logger to JSON lines on stderr (idempotent)."""
    logger = logging.getLogger("lakefeed")
    logger.setLevel(level.upper())
    if not any(getattr(h, "_lakefeed", False) for h in logger.handlers):
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._lakefeed = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name if name.startswith("lakefeed") else f"lakefeed.{name}")


def spark_log_levels(spark: Any, loggers: Iterable[str]) -> dict[str, str]:
    """The log4j level each of the Spark JVM ``loggers`` has now (inherited or its own), to put
    back with :func:`set_spark_log_level`; empty under Spark Connect."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return {}
    manager = jvm.org.apache.logging.log4j.LogManager
    return {name: str(manager.getLogger(name).getLevel().toString()) for name in loggers}


def set_spark_log_level(spark: Any, loggers: Iterable[str], level: str) -> None:
    """Set log4j ``level`` (``ERROR``, ``OFF``...) on Spark JVM ``loggers`` of a classic session;
    under Spark Connect the server's log4j configuration decides, and nothing is set."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return
    wanted = jvm.org.apache.logging.log4j.Level.toLevel(level)
    for name in loggers:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, wanted)
