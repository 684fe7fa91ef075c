"""``lakefeed validate --check-connections``: can each flow reach what it reads, before a run?

Starts no query. For every outside source a flow declared (``lf.source``, ``lf.read_kafka``,
``lf.read_files``, a Delta path), its connector's ``check_connection`` asks what it reads from
(Kafka: brokers answer a metadata request made with the flow's own ``kafka.*`` options, secrets
scrubbed; Delta: the source table exists); any other source with a path must find its folder.
A failed check says what, for which flow, and the fix; the command exits non-zero if any failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakefeed.connectors import registry
from lakefeed.connectors.files.globs import PathMatcher
from lakefeed.connectors.files.options import location
from lakefeed.core import storage
from lakefeed.core.options import Options
from lakefeed.runtime.results import ConnectionCheck

Sources = Mapping[str, Iterable[tuple[str, Mapping[str, str]]]]


Check = ConnectionCheck


def check_connections(sources: Sources) -> list[Check]:
    """One :class:`Check` per outside source of each flow (generators need none)."""
    checks: list[Check] = []
    for flow, flow_sources in sources.items():
        for fmt, options in flow_sources:
            check = _check(flow, fmt, options)
            if check is not None:
                checks.append(check)
    return checks


def _check(flow: str, fmt: str, options: Mapping[str, str]) -> Check | None:
    connector = registry.find(fmt)
    if connector is not None and connector.check_connection is not None:
        reached = connector.check_connection(options)
        return None if reached is None else Check(flow, reached.target, reached.ok, reached.detail)
    path = Options(options).get("path")
    return None if path is None else _folder(flow, path)


def _folder(flow: str, path: str) -> Check:

    if "://" in path and not path.startswith("file:") and not storage.is_object_store(path):
        return Check(flow, f"path {path}", True, "remote path: not checked")
    base = PathMatcher.of(location(path), None, False).base
    if storage.exists(base):
        return Check(flow, f"path {path}", True, "exists")
    return Check(flow, f"path {path}", False, f"{base} does not exist: create it, or fix the path")
