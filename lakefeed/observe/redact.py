"""Secrets (SASL/DB passwords, tokens) must never reach logs, the event log or the UI.

Everything that leaves the process as text passes through here.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|credential|api[._-]?key|sasl\.jaas\.config|"
    r"ssl\.key\.pem|ssl\.keystore\.|private[._-]?key)",
    re.IGNORECASE,
)
# key=value, key: value, "key": "value" forms inside free text (error messages, descriptions).
_SECRET_PAIR = re.compile(
    r"""(?P<key>["']?[\w.\-]*(?:password|passwd|secret|token|credential|api[._-]?key|"""
    r"""sasl\.jaas\.config)[\w.\-]*["']?\s*[=:]\s*)(?P<value>"[^"]*"|'[^']*'|[^\s,;}\])]+)""",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str) -> str:
    """Mask the value of anything that looks like ``password=...`` inside free text."""
    return _SECRET_PAIR.sub(lambda m: f"{m.group('key')}{MASK}", text)


def redact(value: Any) -> Any:
    """Recursively mask secret-named keys and secret-looking pairs inside strings."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and is_secret_key(k) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
