"""A small real pipeline the browser test watches: parsed, deduplicated IoT readings (with a
watermark and state), plus a flow that fails on its first batch (an ``expect_or_fail`` rule no
reading can pass). Two flows only: every flow costs Python worker processes."""

from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL


def parsed():
    raw = lf.source("iot", rowsPerSecond="300", devices="5", malformedRate="0.05")
    return raw.select(F.from_json("value", PAYLOAD_DDL).alias("r")).select("r.*")


@lf.table(comment="parsed readings, duplicates dropped; bad temperatures are quarantined")
@lf.expect_or_drop("temp_in_range", "temperature BETWEEN -60 AND 150")
def readings():
    return (
        parsed()
        .withWatermark("event_time", "5 seconds")
        .dropDuplicatesWithinWatermark(["event_id"])
    )


@lf.table(comment="fails at once: battery is a percentage, never above 100")
@lf.expect_or_fail("battery_above_100", "battery > 100")
def battery_check():
    return parsed().select("device_id", "battery")
