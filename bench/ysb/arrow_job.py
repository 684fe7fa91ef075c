"""YSB's physical limit on this machine: the same query in pyarrow, no engine, all cores.

What a batch job that knows its input by heart can do: one process per core, each reads whole
JSON files with pyarrow's multithreaded reader (only the three fields the query needs, as
strings), keeps the views, maps ``ad_id`` to its campaign by a hash lookup and counts per
(campaign, 10-second window); the driver adds the per-file counts. No streaming, no state
store, no exactly-once, no table commit: an upper bound the streaming legs are reported
against, not a competitor.

Run: ``python -m bench.ysb.arrow_job --input DIR --campaigns FILE --work DIR``
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from bench.ysb import protocol

WINDOW_MS = 10_000
FIELDS = ("ad_id", "event_type", "event_time")
KEYS = ["campaign_id", "window_start"]


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    if args.warmup:
        _run(args)
    elapsed, counts = _run(args)
    args.work.mkdir(parents=True, exist_ok=True)
    output = args.work / "output.parquet"
    pq.write_table(counts, output)
    protocol.emit(elapsed_s=elapsed, output=str(output), format="parquet")


def _run(args: argparse.Namespace) -> tuple[float, pa.Table]:
    """The job time (process pool start included) and the window counts."""
    started = time.perf_counter()
    files = sorted(str(p) for p in args.input.glob("*.json"))
    with ProcessPoolExecutor(args.cores) as pool:
        parts = list(pool.map(_file_counts, files, [str(args.campaigns)] * len(files)))
    total = pa.concat_tables(parts).group_by(KEYS).aggregate([("count", "sum")])
    counts = pa.table({**{k: total[k] for k in KEYS}, "count": total["count_sum"]})
    return time.perf_counter() - started, counts


def _file_counts(path: str, campaigns_path: str) -> pa.Table:
    """Views per (campaign, window start in ms) in one file."""
    campaigns = pajson.read_json(campaigns_path)
    strings = pa.schema([(name, pa.string()) for name in FIELDS])
    events = pajson.read_json(
        path,
        parse_options=pajson.ParseOptions(
            explicit_schema=strings, unexpected_field_behavior="ignore"
        ),
    )
    views = events.filter(pc.equal(events["event_type"], "view"))
    slot = pc.index_in(views["ad_id"], value_set=campaigns["ad_id"])
    campaign = pc.take(campaigns["campaign_id"], slot)
    millis = pc.cast(views["event_time"], pa.int64())
    window = pc.multiply(pc.divide(millis, WINDOW_MS), WINDOW_MS)  # integer division
    table = pa.table({"campaign_id": campaign, "window_start": window}).drop_null()
    counted = table.group_by(KEYS).aggregate([([], "count_all")])
    return pa.table({**{k: counted[k] for k in KEYS}, "count": counted["count_all"]})


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = protocol.job_arguments(__doc__.splitlines()[0])
    return p.parse_args(argv)


if __name__ == "__main__":
    main()
