"""``lakefeed validate --check-connections``: can each flow reach what it reads, before a run?

Starts no query. For every outside source a flow declared (``lf.source``, ``lf.read_kafka``,
``lf.read_files``, a Delta path): Kafka brokers answer a metadata request made with the flow's
own ``kafka.*`` options (SASL/SSL included: the same client config a run uses; messages are
scrubbed of secrets), input folders exist, Delta source tables exist. A failed check says what,
for which flow, and the fix; the command exits non-zero if any failed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from lakefeed.explain import explain
from lakefeed.results import ConnectionCheck

Sources = Mapping[str, Iterable[tuple[str, Mapping[str, str]]]]


Check = ConnectionCheck


def check_connections(sources: Sources) -> list[Check]:
    """One :class:`Check` per outside source of each flow (generators need none)."""
    checks: list[Check] = []
    for flow, flow_sources in sources.items():
        for fmt, options in flow_sources:
            check = _check(flow, fmt.lower(), options)
            if check is not None:
                checks.append(check)
    return checks


def _check(flow: str, fmt: str, options: Mapping[str, str]) -> Check | None:
    lowered = {k.lower(): v for k, v in options.items()}
    if fmt in ("lakefeed_kafka", "kafka"):
        return _kafka(flow, options)
    path = lowered.get("path")
    if path is None:
        return None
    if fmt == "delta":
        return _delta(flow, path)
    return _folder(flow, path)


def _kafka(flow: str, options: Mapping[str, str]) -> Check:
    from lakefeed.connectors.kafka.client import BrokerView
    from lakefeed.connectors.kafka.options import parse_source_options

    target = "kafka"
    try:
        parsed = parse_source_options(options, batch=None)
        target = f"kafka {parsed.bootstrap_servers}"
        view = BrokerView(parsed)
        try:
            partitions = view.partitions()
        finally:
            view.close()
    except Exception as error:
        return Check(flow, target, False, str(explain(error)))
    if not partitions:
        return Check(
            flow, target, True, "brokers answer; no partition matches the subscription yet"
        )
    topics = sorted({topic for topic, _ in partitions})
    return Check(flow, target, True, f"brokers answer; {len(partitions)} partitions of {topics}")


def _delta(flow: str, path: str) -> Check:
    from deltalake import DeltaTable

    from lakefeed.connectors.files.options import local_path

    where = local_path(path)
    if DeltaTable.is_deltatable(where):
        return Check(flow, f"delta {path}", True, f"table at version {DeltaTable(where).version()}")
    fix = "check the path, or create the table first" if os.path.exists(where) else "check the path"
    found = "a folder without _delta_log" if os.path.exists(where) else "nothing"
    return Check(flow, f"delta {path}", False, f"no Delta table at {path} ({found} there): {fix}")


def _folder(flow: str, path: str) -> Check:
    from lakefeed.connectors.files.globs import PathMatcher
    from lakefeed.connectors.files.options import local_path

    if "://" in path and not path.startswith("file:"):
        return Check(flow, f"path {path}", True, "remote path: not checked")
    base = PathMatcher.of(local_path(path), None, False).base
    if os.path.isdir(base) or os.path.isfile(base):
        return Check(flow, f"path {path}", True, "exists")
    return Check(flow, f"path {path}", False, f"{base} does not exist: create it, or fix the path")
