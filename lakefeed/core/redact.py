"""Secrets (SASL/DB passwords, keys, tokens) must never reach logs, the event log or the UI.

Everything that leaves the process as text passes through here. Redaction goes by meaning, not
by substring: what is masked is the *value* of a secret-bearing option (``kafka.sasl.jaas.config``,
``ssl.key.password``, ``fs.s3a.secret.key``, ``client_secret``, ...) and the password inside a
connection string (``postgresql://user:pw@host``, ``password="..."`` in a JAAS line). Names are
never masked: a topic ``secret-topic`` keeps its offsets and lag, a table ``bronze_secret`` its
output mode and messages. An option name is secret by how it *ends* (its last words), the way
connector options are spelled, so a name that merely contains "secret" or "token" is not.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

# A name is split into lowercase words ("sasl.jaas.config" → sasl, jaas, config;
# "secretAccessKey" → secret, access, key); it is secret when its words end with one of these.
_SECRET_ENDINGS: tuple[tuple[str, ...], ...] = (
    ("password",),
    ("passwd",),
    ("pwd",),
    ("passphrase",),
    ("jaas", "config"),
    ("secret",),  # only the whole name or after a qualifier below, see _QUALIFIED
    ("token",),
    ("secret", "key"),
    ("secret", "access", "key"),
    ("private", "key"),
    ("api", "key"),
    ("apikey",),
    ("account", "key"),
    ("key", "pem"),
    ("keystore", "key"),
    ("credential",),
    ("credentials",),
    ("connection", "string"),
    ("shared", "access", "key"),  # Azure connection strings
    ("shared", "access", "signature"),
)
# Endings that are ordinary words in a name (bronze_secret, my_token): secret only alone or after
# one of these qualifiers (client_secret, sasl.oauthbearer.client.secret, aws_session_token).
_QUALIFIED = {"secret", "token", "credential", "credentials"}
_QUALIFIERS = {
    "client",
    "shared",
    "app",
    "api",
    "access",
    "session",
    "auth",
    "bearer",
    "refresh",
    "id",
    "sas",
    "security",
    "oauth",
    "oauthbearer",
    "sasl",
    "aws",
    "azure",
    "gcp",
    "service",
    "account",
}
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

_KEY = r"""[A-Za-z_][\w.\-]*"""
# key=value, key: value, key -> value, "key": "value" inside free text (errors, descriptions,
# Scala's Map(k -> v)); the key is then judged by is_secret_key. The value sits in a lookahead so
# that a pair inside another pair's value ("error: password=...") is still found.
_PAIR = re.compile(
    rf"""(?P<q>["']?)(?P<name>{_KEY})(?P=q)\s*(?:=|:|->)\s*"""
    r"""(?=(?P<value>\\"(?:(?!\\").)*\\"|"(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;&{}\[\])"'\\]+))"""
)
# "Authorization: Bearer <token>" and the like: the credential after the scheme word.
_BEARER = re.compile(r"""\b(?P<pre>(?:Bearer|Basic)\s+)[\w.~+/\-]+=*""")
# scheme://user:password@host — the password part of any URL.
_URL_PASSWORD = re.compile(r"""(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@"']*:)[^\s@/"']+@""")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def is_secret_key(key: str) -> bool:
    """Whether ``key`` names a secret-bearing option (judged by its last words, not a substring)."""
    words = _words(key)
    for ending in _SECRET_ENDINGS:
        n = len(ending)
        if tuple(words[-n:]) != ending:
            continue
        if ending[-1] in _QUALIFIED and n == 1 and len(words) > 1:
            return words[-2] in _QUALIFIERS
        return True
    return False


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the values of secret-named pairs are, quotes excluded, in order."""
    spans = []
    for match in _PAIR.finditer(text):
        if is_secret_key(match.group("name")):
            start, end = match.span("value")
            value = match.group("value")
            quote = 2 if value.startswith('\\"') else int(value[:1] in ('"', "'"))
            spans.append((start + quote, end - quote))
    return spans


def redact_text(text: str) -> str:
    """Mask secret option values (``password=...``, JAAS, JSON) and URL passwords in free text."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('pre')}{MASK}@", text)
    text = _BEARER.sub(lambda m: f"{m.group('pre')}{MASK}", text)
    parts, done = [], 0
    for start, end in _secret_spans(text):
        if start >= done:  # a pair inside a value already masked is gone with it
            parts += [text[done:start], MASK]
            done = end
    return "".join(parts) + text[done:]


def redact(value: Any) -> Any:
    """Recursively mask the string values of secret-named keys and secrets inside strings.

    Only a string can be a secret value: a map under a name like ``password-topic`` (offsets
    per partition) is walked into, not masked.
    """
    if isinstance(value, dict):
        return {
            k: (
                MASK
                if isinstance(k, str) and isinstance(v, str | bytes) and is_secret_key(k)
                else redact(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
