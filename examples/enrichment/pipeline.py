"""Stream–static enrichment: IoT readings joined to reference data that changes while they flow.

``readings`` parses the built-in ``iot`` generator's messages (seeded, no external system).
``readings_enriched`` joins each micro-batch of readings to two static tables:

- **devices**, a Delta table outside the pipeline (``enrichment.devicesTable``, default
  ``reference/devices``): device → site, owner. Every micro-batch reads its latest version, as
  the static Delta side of a stream–static join does on Databricks: a device moved with
  ``python examples/enrichment/pipeline.py move dev-00003 Porto`` (delta-rs' ``DeltaTable.update``
  from another process, as any Delta writer would) shows from the next batch on.
- **device_limits**, a PostgreSQL table (``enrichment.limitsTable``) read jar-free with
  ``format("lakefeed_postgres")``: device → max_temp. Each micro-batch reads it as it is then,
  so ``UPDATE device_limits SET max_temp = ...`` in ``psql`` shows from the next batch on.

Both are left joins: a reading of a device missing from a table is kept, with NULLs. Rows
already written keep the values their batch saw (reference data as of processing time); a
dimension change never rewrites them.

``lakefeed verify`` compares ``readings`` exactly with a batch recompute; ``readings_enriched``
is reported as not compared (each batch joined the dimensions as they were then, which a
recompute over today's tables cannot replay), with both row counts, which must agree for left
joins to tables keyed by device.

Configuration (``lakefeed run ... --conf key=value``): ``enrichment.postgresUrl`` (a libpq URI,
default ``postgresql://postgres@localhost:5432/postgres``; give the password in ``PGPASSWORD``
or ``~/.pgpass``, not in the URL), ``enrichment.limitsTable`` (default ``device_limits``),
``enrichment.devicesTable``; the generator's ``enrichment.devices`` (default 10),
``enrichment.rowsPerSecond`` (default 5), ``enrichment.backlogSeconds`` (default 60),
``enrichment.totalRows``, ``enrichment.startTime``, ``enrichment.seed``,
``enrichment.maxRowsPerTrigger``; ``enrichment.maxFilesPerTrigger`` (readings files per
enrichment batch).

``python examples/enrichment/pipeline.py seed [URL]`` creates both reference tables.
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL

DEFAULT_URL = "postgresql://postgres@localhost:5432/postgres"
DEFAULT_DEVICES = "reference/devices"
SITES = ("Lisbon", "Berlin", "Oslo")
GENERATOR = ("totalRows", "startTime", "seed", "maxRowsPerTrigger")


def generator_options() -> dict[str, str]:
    options = {
        "devices": lf.config("enrichment.devices", "10"),
        "rowsPerSecond": lf.config("enrichment.rowsPerSecond", "5"),
        "backlogSeconds": lf.config("enrichment.backlogSeconds", "60"),
        "lateRate": "0",
        "duplicateRate": "0",
        "malformedRate": "0",
    }
    for name in GENERATOR:
        value = lf.config(f"enrichment.{name}")
        if value is not None:
            options[name] = value
    return options


def devices() -> DataFrame:
    """The Delta dimension: a batch read, planned again by every micro-batch that joins it."""
    path = lf.config("enrichment.devicesTable", DEFAULT_DEVICES)
    return lf.active_spark().read.format("delta").load(path)


def device_limits() -> DataFrame:
    """The PostgreSQL dimension, read as it is by every micro-batch that joins it."""
    return (
        lf.active_spark()
        .read.format("lakefeed_postgres")
        .option("url", lf.config("enrichment.postgresUrl", DEFAULT_URL))
        .option("dbtable", lf.config("enrichment.limitsTable", "device_limits"))
        .load()
    )


@lf.table(comment="one row per reading: event id, device, time, temperature")
def readings():
    raw = lf.source("iot", **generator_options()).select(
        F.from_json("value", PAYLOAD_DDL).alias("r")
    )
    return raw.select("r.event_id", "r.device_id", "r.event_time", "r.temperature")


@lf.table(comment="readings with their device's site and owner (Delta) and limit (PostgreSQL)")
def readings_enriched():
    files = lf.config("enrichment.maxFilesPerTrigger")
    stream = lf.read_stream("readings", **({"maxFilesPerTrigger": files} if files else {}))
    return (
        stream.join(devices(), "device_id", "left")
        .join(device_limits(), "device_id", "left")
        .select(
            "event_id",
            "device_id",
            "event_time",
            "temperature",
            "site",
            "owner",
            "max_temp",
            (F.col("temperature") > F.col("max_temp")).alias("over_limit"),
        )
    )


def seed(devices_path: str, url: str, count: int = 10) -> None:
    """Both reference tables, for devices dev-00000.. : sites round-robin, limit 30 °C."""
    import psycopg
    import pyarrow as pa
    from deltalake import write_deltalake

    ids = [f"dev-{i:05d}" for i in range(count)]
    write_deltalake(
        devices_path,
        pa.table(
            {
                "device_id": ids,
                "site": [SITES[i % len(SITES)] for i in range(count)],
                "owner": [f"team-{i % 2}" for i in range(count)],
            }
        ),
        mode="overwrite",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS device_limits")
        conn.execute("CREATE TABLE device_limits (device_id text PRIMARY KEY, max_temp float8)")
        with conn.cursor().copy("COPY device_limits FROM STDIN") as copy:
            for device in ids:
                copy.write_row((device, 30.0))


def move(devices_path: str, device: str, site: str) -> None:
    """Move ``device`` to ``site``: one Delta commit, as any other writer of the table makes."""
    from deltalake import DeltaTable

    quoted = device.replace("'", "''")
    DeltaTable(devices_path).update(predicate=f"device_id = '{quoted}'", new_values={"site": site})


if __name__ == "__main__":
    path = DEFAULT_DEVICES
    match sys.argv[1:]:
        case ["seed", *rest]:
            seed(path, rest[0] if rest else DEFAULT_URL)
            print(f"wrote {path} (Delta) and device_limits (PostgreSQL)")
        case ["move", device, site]:
            move(path, device, site)
            print(f"moved {device} to {site} in {path}")
        case _:
            sys.exit("usage: pipeline.py seed [POSTGRES_URL] | move DEVICE SITE")
