"""Yahoo Streaming Benchmark: lakefeed vs a plain PySpark job vs PyFlink, in one run, and the
machine's physical limit (the same query in pyarrow on all cores, ``arrow``).

Generates the events once (JSON files, and a Kafka topic for the lakefeed Kafka leg), runs each
implementation as its own process several times in rotating order, checks every output against
reference window counts computed with numpy, prints events/s, the ratios lakefeed/PySpark and
lakefeed/Flink, and writes ``results.json`` plus a PNG chart. The performance page's YSB rows
(``bench/results/ysb_*.json``) are written through :mod:`bench.results` (:mod:`bench.ysb.record`):
a run with a row's stored arguments replaces it; any other run writes only with ``--results DIR``.

    .venv/bin/python -m bench.ysb.run --events 5000000 --repeats 3 --chart docs/ysb.png

Throughput = input events / job time. Job time runs from building the query/job to its end
(``availableNow`` for Spark, end of the bounded input for Flink; lakefeed's includes validating
and evaluating its pipeline, the PySpark job's building its DataFrames, ``build_s`` in
``results.json``); session and gateway start-up are excluded for all, and reported separately
as wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.results import add_option
from bench.ysb import events as ev
from bench.ysb.harness import (
    ROOT,
    LegRun,
    bar_chart,
    ensure_flink_venv,
    exit_on_sigterm,
    fresh_dir,
    load_average,
    machine,
    median,
    run_leg,
)
from bench.ysb.record import Recorder

PIPELINE = ROOT / "bench" / "ysb" / "pipeline.py"
LEGS = ("lakefeed", "lakefeed-arrow", "pyspark", "flink", "lakefeed-kafka", "arrow")
"""``lakefeed-arrow``: the same pipeline with ``lakefeed.reader=arrow`` (lakefeed's Arrow reader
parsing only the columns the flow reads and dropping rows its filter drops, see
``lakefeed/connectors/files/arrow_read.py``)."""
ALL_WINDOWS = ("flink", "arrow")  # legs that emit every window (Spark's last ones stay open)
TOPIC = "ad-events"
CAMPAIGNS = "campaigns/campaigns.json"


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    parser = _parser()
    args = parser.parse_args(given)
    recorder = Recorder.begin(parser, given)
    exit_on_sigterm()
    out: Path = args.out
    spec = ev.EventSpec(args.events, rate=args.event_rate)
    campaigns = ev.Campaigns.generate(spec.seed)
    gen = ev.Generator(spec, campaigns)
    inputs = prepare_files(gen, args.inputs or out / "input", args.files)
    reference = gen.reference_counts()
    closed = gen.max_event_time_ms() - 10_000  # Spark's final watermark (delay 10 s)
    legs = [leg for leg in args.legs.split(",") if leg]
    flink_python = ensure_flink_venv() if "flink" in legs else None
    print(
        f"YSB: {spec.events:,} events in {args.files} files, {len(reference)} windows; "
        f"machine {machine()}; load {load_average():.1f}",
        flush=True,
    )

    runs: list[LegRun] = []
    with _kafka_input(gen, out, legs, args.partitions) as bootstrap:
        for repeat in range(args.repeats):
            order = legs[repeat % len(legs) :] + legs[: repeat % len(legs)]
            for leg in order:
                work = fresh_dir(out / "work" / f"{leg}-{repeat}")
                argv_ = _argv(leg, args, inputs, work, flink_python)
                if argv_ is None:
                    runs.append(LegRun(leg, error="PyFlink venv unavailable"))
                    continue
                log = out / "logs" / f"{leg}-{repeat}.log"
                run = run_leg(leg, argv_, log, args.timeout, _ysb_env(leg, args, inputs, bootstrap))
                if run.error is None:
                    _score(
                        run.figures, spec.events, reference, None if leg in ALL_WINDOWS else closed
                    )
                _print_run(repeat, run)
                runs.append(run)
    summary = _summarise(runs, legs, spec, args)
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    _print_summary(summary)
    recorder.write(summary, args)
    if args.chart:
        _chart(summary, args.chart)
    return 0 if all(not s["failures"] and s["correct"] for s in summary["legs"].values()) else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=5_000_000)
    p.add_argument("--event-rate", type=int, default=20_000, help="events per second of event time")
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--max-files", type=int, default=8, help="maxFilesPerTrigger (both Spark legs)")
    p.add_argument("--partitions", type=int, default=4, help="Kafka topic partitions")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--legs", default=",".join(LEGS), help=f"comma list of {LEGS}")
    p.add_argument(
        "--reader",
        choices=("spark", "python", "arrow"),
        default=None,
        help="force the lakefeed leg's cloudFiles reader (option lakefeed.reader; default: "
        "none, lakefeed chooses as it does for a user)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "ysb")
    p.add_argument("--chart", type=Path, default=None, help="write a PNG chart here")
    p.add_argument(
        "--inputs", type=Path, default=None, help="where the input is generated (default OUT/input)"
    )
    p.add_argument(
        "--master", default=None, help="the lakefeed legs' Spark master (default local[CORES])"
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        help="spark.key=value for the lakefeed legs, repeatable",
    )
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument(
        "--warmup",
        action="store_true",
        help="each leg first runs the whole job once in the same process (JIT, workers), then "
        "the measured run: steady-state throughput instead of a cold start",
    )
    add_option(p)
    return p


def prepare_files(gen: ev.Generator, folder: Path, files: int) -> Path:
    """Write the JSON files, or reuse them when the same spec was written before."""
    stamp = folder / "_spec.json"
    wanted = json.dumps({"spec": gen.spec.__dict__, "files": files})
    if not (stamp.exists() and stamp.read_text() == wanted):
        started = time.perf_counter()
        for old in folder.glob("events/*.json"):
            old.unlink()
        ev.write_json_files(gen, folder / "events", files)
        gen.campaigns.write_json(folder / CAMPAIGNS)
        stamp.write_text(wanted)
        print(f"generated input in {time.perf_counter() - started:.1f} s", flush=True)
    return folder


@contextlib.contextmanager
def _kafka_input(
    gen: ev.Generator, out: Path, legs: list[str], partitions: int
) -> Iterator[str | None]:
    """A broker holding the events in topic ``ad-events`` while the Kafka leg is wanted."""
    if "lakefeed-kafka" not in legs:
        yield None
        return
    from bench.ysb import broker

    with broker.tansu(out / "logs" / "tansu.log") as bootstrap:
        started = time.perf_counter()
        produce_events(gen, bootstrap, TOPIC, partitions)
        print(
            f"produced {gen.spec.events:,} events to Kafka in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        yield bootstrap


def produce_events(gen: ev.Generator, bootstrap: str, topic: str, partitions: int) -> None:
    """Every event once, round-robin over the partitions so they advance in step."""
    from bench.ysb import broker

    broker.create_topic(bootstrap, topic, partitions)
    producer: Any = broker.producer(bootstrap)
    for start, n in gen.chunks(100_000):
        for i, line in enumerate(gen.json_lines(start, n).to_pylist()):
            while True:
                try:
                    producer.produce(topic, line.encode(), partition=(start + i) % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("Kafka producer could not deliver every event")


def _argv(
    leg: str, args: argparse.Namespace, inputs: Path, work: Path, flink_python: Path | None
) -> list[str] | None:
    """The command of one leg; None when its engine is unavailable."""
    common = ["--work", str(work), "--cores", str(args.cores)] + ["--warmup"] * args.warmup
    files = ["--input", str(inputs / "events"), "--campaigns", str(inputs / CAMPAIGNS)]
    max_files = ["--max-files", str(args.max_files)]
    if leg == "pyspark":
        return [sys.executable, "-m", "bench.ysb.pyspark_job", *files, *common, *max_files]
    if leg == "arrow":
        return [sys.executable, "-m", "bench.ysb.arrow_job", *files, *common]
    if leg == "flink":
        if flink_python is None:
            return None
        return [str(flink_python), str(ROOT / "bench" / "ysb" / "flink_job.py"), *files, *common]
    if leg in ("lakefeed", "lakefeed-arrow", "lakefeed-kafka"):
        table = ["--pipeline", str(PIPELINE), "--table", "ysb_window_counts"]
        spark = ["--master", args.master] if args.master else []
        for item in args.spark_conf:
            spark += ["--spark-conf", item]
        return [sys.executable, "-m", "bench.ysb.lakefeed_leg", *table, *common, *spark]
    raise SystemExit(f"unknown leg {leg!r}; choose from {LEGS}")


def _ysb_env(
    leg: str, args: argparse.Namespace, inputs: Path, bootstrap: str | None
) -> dict[str, str]:
    """How the lakefeed pipeline finds its input (see ``bench/ysb/sources.py``)."""
    env = {"YSB_CAMPAIGNS": str(inputs / CAMPAIGNS)}
    if leg == "lakefeed-kafka":
        per_batch = args.max_files * args.events // args.files
        env.update(YSB_BOOTSTRAP=str(bootstrap), YSB_TOPIC=TOPIC, YSB_MAX_OFFSETS=str(per_batch))
    else:
        env.update(YSB_INPUT=str(inputs / "events"), YSB_MAX_FILES=str(args.max_files))
        if leg == "lakefeed-arrow":
            env.update(YSB_READER="arrow")
        elif args.reader is not None:
            env.update(YSB_READER=args.reader)
    return env


def _read_counts(figures: dict[str, Any]) -> ev.WindowCounts:
    """Window counts from a leg's output, whatever its format."""
    import pyarrow as pa

    path, fmt = figures["output"], figures.get("format", "parquet")
    if fmt == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(path).to_pyarrow_table()
    elif fmt == "csv":
        import pyarrow.csv as pcsv

        names = pcsv.ReadOptions(column_names=["campaign_id", "window_start", "count"])
        parts = [pcsv.read_csv(p, read_options=names) for p in sorted(Path(path).glob("part-*"))]
        table = pa.concat_tables(parts)
    else:
        import pyarrow.dataset as ds

        table = ds.dataset(path, format="parquet").to_table()
    return ev.counts_from_table(table)


def _print_run(repeat: int, run: LegRun) -> None:
    if run.error:
        print(f"  #{repeat} {run.leg:15} FAILED: {run.error}", flush=True)
        return
    f = run.figures
    ok = "counts OK" if not f["problems"] else f"{len(f['problems'])} WRONG: {f['problems'][:2]}"
    first = f.get("first_batch_s")
    startup = f"  first batch after {first:.2f} s {f.get('startup_s') or ''}" if first else ""
    print(
        f"  #{repeat} {run.leg:15} {f['events_per_s']:>12,.0f} events/s  job "
        f"{f['elapsed_s']:6.1f} s  wall {run.wall_s:6.1f} s  {ok}{startup}",
        flush=True,
    )


def _score(
    figures: dict[str, Any], events: int, reference: ev.WindowCounts, closed: int | None
) -> None:
    """Add throughput (job time, and streaming time when known) and the reference check."""
    figures["events_per_s"] = events / figures["elapsed_s"]
    figures["load"] = load_average()
    stream_s = figures.get("stream_s")
    figures["stream_events_per_s"] = events / stream_s if stream_s else None
    figures["problems"] = ev.compare(reference, _read_counts(figures), closed)


def _summarise(
    runs: list[LegRun], legs: list[str], spec: ev.EventSpec, args: argparse.Namespace
) -> dict[str, Any]:
    per_leg: dict[str, Any] = {}
    for leg in legs:
        good = [r for r in runs if r.leg == leg and r.error is None]
        rates = [r.figures["events_per_s"] for r in good]
        streaming = [
            r.figures["stream_events_per_s"] for r in good if r.figures["stream_events_per_s"]
        ]
        per_leg[leg] = {
            "events_per_s": rates,
            "median_events_per_s": median(rates),
            "stream_events_per_s": streaming,
            "median_stream_events_per_s": median(streaming) if streaming else None,
            "median_wall_s": median([r.wall_s for r in good]),
            "first_batch_s": [r.figures.get("first_batch_s") for r in good],
            "build_s": [r.figures.get("build_s") for r in good],
            "session_s": [r.figures.get("session_s") for r in good],
            "correct": bool(good) and all(not r.figures["problems"] for r in good),
            "durations_ms": [r.figures.get("durations_ms") for r in good],
            "load_after_run": [round(r.figures["load"], 1) for r in good],
            "failures": [r.error for r in runs if r.leg == leg and r.error],
        }
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": "python -m bench.ysb.run " + " ".join(sys.argv[1:]),
        "events": spec.events,
        "files": args.files,
        "repeats": args.repeats,
        "legs": per_leg,
        "ratios": _ratios(per_leg),
    }


def _ratios(per_leg: dict[str, Any]) -> dict[str, float]:
    """lakefeed over each baseline and the physical limit, on medians; also on streaming time
    for PySpark."""
    ratios = {}
    for leg, other, key in (
        ("lakefeed", "pyspark", "median_events_per_s"),
        ("lakefeed", "flink", "median_events_per_s"),
        ("lakefeed", "arrow", "median_events_per_s"),
        ("lakefeed", "pyspark", "median_stream_events_per_s"),
        ("lakefeed-arrow", "pyspark", "median_events_per_s"),
        ("lakefeed-arrow", "arrow", "median_events_per_s"),
        ("lakefeed-arrow", "lakefeed", "median_events_per_s"),
    ):
        mine, theirs = per_leg.get(leg, {}).get(key), per_leg.get(other, {}).get(key)
        if mine and theirs and mine == mine and theirs == theirs:  # skip NaN (no good run)
            suffix = ", streaming time only" if key.startswith("median_stream") else ""
            ratios[f"{leg}/{other}{suffix}"] = mine / theirs
    return ratios


def _print_summary(summary: dict[str, Any]) -> None:
    from bench.ysb.doc import ysb

    print("\n" + "\n".join(ysb(summary)))
    print("\nwhere the Spark legs spent their batch time (ms, summed over batches, first run):")
    for leg, s in summary["legs"].items():
        if s["durations_ms"] and s["durations_ms"][0]:
            phases = sorted(s["durations_ms"][0].items(), key=lambda kv: -kv[1])
            print(f"  {leg}: " + ", ".join(f"{k} {v:,}" for k, v in phases[:5]))


def _chart(summary: dict[str, Any], path: Path) -> None:
    legs = [leg for leg, s in summary["legs"].items() if s["events_per_s"]]
    bar_chart(
        path,
        f"Yahoo Streaming Benchmark, {summary['events']:,} events, {summary['machine']}",
        legs,
        [summary["legs"][leg]["median_events_per_s"] for leg in legs],
        "events/s (median)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
