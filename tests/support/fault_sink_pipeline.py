"""A Delta sink filled by an append flow (the fault trials' sink scenario): the IoT generator's
rows, bounded by ``iot.totalRows``, exported to ``sink.path``."""

import lakefeed as lf

GENERATOR = ("rowsPerSecond", "devices", "totalRows", "startTime", "seed", "maxRowsPerTrigger")

lf.create_sink("export", "delta", {"path": lf.config("sink.path")})


@lf.append_flow(target="export")
def export_readings():
    options = {name: lf.config(f"iot.{name}") for name in GENERATOR if lf.config(f"iot.{name}")}
    return lf.source("iot", lateRate="0", **options)
