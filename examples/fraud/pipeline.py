"""Fraud detection: card transactions → per-card state in ``transformWithState`` → alerts.

Transactions land as JSON files in a folder (``fraud.landing``, default ./landing; ``python
examples/fraud/pipeline.py landing`` writes a sample with planted fraud). ``transactions``
ingests each file once; ``alerts`` keeps per-card state in Spark's ``transformWithState``
(event-time mode) and appends one row per rule hit:

- **velocity**: ``fraud.velocityCount`` transactions (default 4) of one card within
  ``fraud.velocityWindow`` (default 10 minutes) → one alert per burst (a card alerts again once
  its count within the window has fallen below the threshold). The recent transactions live in
  a ListState; an event-time timer at (last transaction + window) clears them once the
  watermark passes it, so a card's window state expires with the window.
- **impossible travel**: two transactions of a card whose distance / time gap needs more than
  ``fraud.maxSpeedKmh`` (default 900 km/h, an airliner) → an alert naming both places. The last
  located transaction lives in a ValueState.

Both state variables also carry a TTL (``fraud.stateTtl``, default 1 day of processing time): a
card that stops without its timer firing (input stops, the watermark stands still) does not keep
state forever. ``card_activity`` shows a processing-time timer (its own operator: Spark has one
time mode per operator): per card a running profile, and after ``fraud.idleAfter`` (default 1
hour) of wall-clock time without a transaction one ``idle`` row with the card's totals, then its
state is cleared.

Alerts depend on event time only, never on how transactions fall into micro-batches: the
timers only free state no later transaction could use. So ``lakefeed verify`` can compare
``alerts`` with a batch run (a transaction arriving after a later one of its card, within the
watermark, is the exception: the stream saw them out of order).

Transactions at or before the watermark (``fraud.watermark``, default 5 minutes) cannot reach
the ``alerts`` operator (Spark drops them for any event-time operator); ``late_rows="keep"``
keeps them in ``alerts_late`` for review, counted as kept in ``lakefeed status`` and the UI.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

import lakefeed as lf

TRANSACTION_DDL = (
    "txn_id STRING, card_id STRING, amount DOUBLE, txn_time TIMESTAMP, city STRING, "
    "lat DOUBLE, lon DOUBLE"
)
ALERT_DDL = (
    "card_id STRING, rule STRING, alert_time TIMESTAMP, txn_id STRING, txn_count INT, detail STRING"
)
ACTIVITY_DDL = (
    "card_id STRING, status STRING, txns BIGINT, amount DOUBLE, first_time TIMESTAMP, "
    "last_time TIMESTAMP"
)
EARTH_RADIUS_KM = 6371.0


def _ms(duration: str) -> int:
    """'10 minutes' → milliseconds (units: second, minute, hour, day; plural or not)."""
    amount, unit = duration.split()
    seconds = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]
    return int(float(amount) * seconds * 1000)


def _epoch_ms(value: datetime) -> int:
    if value.tzinfo is None:  # Spark hands naive datetimes in the session time zone (UTC)
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle (haversine) distance."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def _replace_timers(handle: StatefulProcessorHandle, expiry_ms: int) -> None:
    """One pending timer per card: drop the ones registered before, register ``expiry_ms``."""
    for timer in list(handle.listTimers()):
        handle.deleteTimer(timer)
    handle.registerTimer(expiry_ms)


class CardRules(StatefulProcessor):
    """Velocity and impossible-travel rules over one card's transactions (event-time mode)."""

    def __init__(self, count: int, window_ms: int, max_kmh: float) -> None:
        self.count, self.window_ms, self.max_kmh = count, window_ms, max_kmh
        # After this long any two places on earth are reachable: the last place can go.
        self.travel_ms = int(math.pi * EARTH_RADIUS_KM / max_kmh * 3_600_000)

    def init(self, handle: StatefulProcessorHandle) -> None:
        # No TTL here: Spark allows TTL only in processing-time mode; timers expire this state.
        self.handle = handle
        self.recent = handle.getListState("recent", "txn_ms LONG, txn_id STRING")
        self.alerted = handle.getValueState("burst_alerted", "alerted BOOLEAN")
        self.last = handle.getValueState(
            "last_seen", "txn_ms LONG, city STRING, lat DOUBLE, lon DOUBLE"
        )

    def handleInputRows(
        self, key: tuple, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        card = key[0]
        recent = list(self.recent.get()) if self.recent.exists() else []
        alerted = self.alerted.exists() and bool(self.alerted.get()[0])
        last = self.last.get() if self.last.exists() else None
        for row in sorted(rows, key=lambda r: (r.txn_time, r.txn_id)):
            at = _epoch_ms(row.txn_time)
            recent = [r for r in recent if r[0] > at - self.window_ms] + [(at, row.txn_id)]
            # The burst is over once too few are left in the window: by event time alone, so
            # the alerts do not depend on where micro-batches (or timers) fall.
            alerted = alerted and len(recent) >= self.count
            if len(recent) >= self.count and not alerted:
                alerted = True
                yield self._alert(card, "velocity", at, row.txn_id, len(recent), "")
            if row.lat is not None and row.lon is not None:
                if last is not None:
                    yield from self._travel(card, last, at, row)
                if last is None or at >= last[0]:
                    last = (at, row.city, row.lat, row.lon)
        self.recent.put(recent)
        self.alerted.update((alerted,))
        if last is not None:
            self.last.update(last)
        _replace_timers(self.handle, max(r[0] for r in recent) + self.window_ms)
        if last is not None:
            self.handle.registerTimer(last[0] + self.travel_ms)

    def _travel(self, card: str, last: tuple, at: int, row: Row) -> Iterator[Row]:
        hours = abs(at - last[0]) / 3_600_000
        km = distance_km(last[2], last[3], row.lat, row.lon)
        if km > 0 and (hours == 0 or km / hours > self.max_kmh):
            speed = "instantly" if hours == 0 else f"at {km / hours:,.0f} km/h"
            detail = f"{last[1]} → {row.city}: {km:,.0f} km in {hours * 60:.0f} min ({speed})"
            yield self._alert(card, "impossible_travel", at, row.txn_id, 2, detail)

    def handleExpiredTimer(
        self, key: tuple, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        # The watermark passed a deadline: a burst window closed, or the last place is too old
        # to make any trip impossible. A card with neither left keeps no state.
        watermark = timerValues.getCurrentWatermarkInMs()
        recent = list(self.recent.get()) if self.recent.exists() else []
        if not recent or max(r[0] for r in recent) + self.window_ms <= watermark:
            self.recent.clear()
            self.alerted.clear()
        if self.last.exists() and self.last.get()[0] + self.travel_ms <= watermark:
            self.last.clear()
        return iter([])

    @staticmethod
    def _alert(card: str, rule: str, at: int, txn: str, count: int, detail: str) -> Row:
        return Row(
            card_id=card, rule=rule, alert_time=_time(at), txn_id=txn, txn_count=count,
            detail=detail,
        )  # fmt: skip

    def close(self) -> None:
        pass


class CardActivity(StatefulProcessor):
    """A running profile per card; a processing-time timer emits it once the card goes idle."""

    def __init__(self, idle_ms: int, ttl_ms: int) -> None:
        self.idle_ms, self.ttl_ms = idle_ms, ttl_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.profile = handle.getValueState(
            "profile", "txns LONG, amount DOUBLE, first_ms LONG, last_ms LONG", self.ttl_ms
        )

    def handleInputRows(
        self, key: tuple, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        txns, amount, first, last = self.profile.get() if self.profile.exists() else (0, 0.0, 0, 0)
        for row in rows:
            at = _epoch_ms(row.txn_time)
            txns, amount = txns + 1, amount + (row.amount or 0.0)
            first, last = (min(first, at) if first else at), max(last, at)
        self.profile.update((txns, amount, first, last))
        _replace_timers(self.handle, timerValues.getCurrentProcessingTimeInMs() + self.idle_ms)
        return iter([])

    def handleExpiredTimer(
        self, key: tuple, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        if self.profile.exists():
            txns, amount, first, last = self.profile.get()
            self.profile.clear()
            yield Row(
                card_id=key[0], status="idle", txns=txns, amount=amount,
                first_time=_time(first), last_time=_time(last),
            )  # fmt: skip

    def close(self) -> None:
        pass


@lf.table(comment="every landed card transaction once")
def transactions():
    landing = lf.config("fraud.landing") or "landing"
    files = lf.config("fraud.maxFilesPerTrigger")
    limit = {"cloudFiles.maxFilesPerTrigger": files} if files else {}
    return lf.read_files(landing, "json", schema=TRANSACTION_DDL, **limit).drop("_metadata")


@lf.table(
    comment="one row per fraud rule hit: velocity bursts and impossible travel",
    late_rows="keep",  # transactions too late for the watermark land in alerts_late
)
def alerts():
    rules = CardRules(
        count=int(lf.config("fraud.velocityCount", "4")),
        window_ms=_ms(lf.config("fraud.velocityWindow", "10 minutes")),
        max_kmh=float(lf.config("fraud.maxSpeedKmh", "900")),
    )
    return (
        lf.read_stream("transactions")
        .withWatermark("txn_time", lf.config("fraud.watermark", "5 minutes"))
        .groupBy("card_id")
        .transformWithState(rules, ALERT_DDL, "Append", "EventTime")
    )


@lf.table(comment="per card totals, written once the card has been idle for fraud.idleAfter")
def card_activity():
    activity = CardActivity(
        idle_ms=_ms(lf.config("fraud.idleAfter", "1 hour")),
        ttl_ms=_ms(lf.config("fraud.stateTtl", "1 day")),
    )
    return (
        lf.read_stream("transactions")
        .groupBy("card_id")
        .transformWithState(activity, ACTIVITY_DDL, "Append", "ProcessingTime")
    )


def sample(start: datetime) -> list[dict]:
    """Six clean cards shopping at home, and two planted frauds: a velocity burst on card
    c-fast and a Lisbon → Singapore hop on card c-travel."""
    homes = {"Lisbon": (38.72, -9.14), "Berlin": (52.52, 13.40), "Oslo": (59.91, 10.75)}
    rows = []

    def txn(card: str, minute: float, city: str, amount: float) -> None:
        lat, lon = {**homes, "Singapore": (1.35, 103.82)}[city]
        at = start + timedelta(minutes=minute)
        rows.append(
            {"txn_id": f"{card}-{len(rows)}", "card_id": card, "amount": amount,
             "txn_time": at.isoformat(), "city": city, "lat": lat, "lon": lon}
        )  # fmt: skip

    for i, city in enumerate(list(homes) * 2):
        for n in range(3):
            txn(f"c-{i}", 40 * n + i, city, 12.5 + n)
    for n in range(5):
        txn("c-fast", 60 + n, "Berlin", 99.0)
    txn("c-travel", 30, "Lisbon", 20.0)
    txn("c-travel", 90, "Singapore", 950.0)
    return sorted(rows, key=lambda r: r["txn_time"])


if __name__ == "__main__":
    landing = Path(sys.argv[1] if len(sys.argv) > 1 else "landing")
    landing.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    out = landing / f"transactions-{now:%Y%m%dT%H%M%S}.json"
    out.write_text("".join(json.dumps(r) + "\n" for r in sample(now)))
    print(f"wrote {out}")
