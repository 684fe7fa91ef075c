"""Where a pipeline reads and writes, found before any Spark session exists, without running it.

Spark's S3A jars can only be added when the session starts, and the session starts before any
pipeline code runs (module-level Spark calls need it, see :mod:`lakefeed.pipeline.loader`); a
landing folder or a source table on ``s3://`` is named inside that code
(``lf.read_files(path)``, ``spark.readStream.format("cloudFiles")...load(path)``). So the
places such a location is written are read as text instead: every ``s3://`` / ``s3a://`` URI
in the pipeline's files (Python and SQL) and in its configuration values (the spec's and
``--conf``'s, e.g. ``lf.config("files.landing")``); for a pipeline already loaded, also its
sinks' options.

Nothing user-written runs here. A location built at run time from elsewhere (an environment
variable, a bucket name joined in code) is not found: name it in a configuration value, or
with ``lakefeed.spark_session(storage=[...])`` (a cloudFiles stream on a folder the session
cannot reach through S3A falls back to lakefeed's own reader).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from lakefeed.pipeline.api import Pipeline, config, config_keys
from lakefeed.pipeline.loader import PipelineFiles

URI = re.compile(r"\bs3a?://[^\s'\"`)\],;{}]+", re.IGNORECASE)


def pipeline_locations(pipeline: Pipeline | PipelineFiles) -> list[str]:
    """The object-store URIs the pipeline names (see the module doc), first seen first."""
    if isinstance(pipeline, PipelineFiles):
        files, options = list(pipeline.files), []
    else:
        sinks = [d.sink for d in pipeline.datasets.values() if d.sink is not None]
        files = _source_files(pipeline)
        options = [str(value) for sink in sinks for value in sink.options.values()]
    texts = [
        *pipeline.configuration.values(),
        *(str(config(key)) for key in config_keys()),  # the run's --conf on top of the spec's
        *options,
        *(_read(file) for file in files),
    ]
    return list(dict.fromkeys(uri.rstrip("/.") for text in texts for uri in URI.findall(text)))


def _source_files(pipeline: Pipeline) -> list[Path]:
    """The files the pipeline's datasets and flows were declared in (``file:line`` sources)."""
    declared: Iterable[str] = (
        where
        for dataset in pipeline.datasets.values()
        for where in (dataset.source, *(flow.source for flow in dataset.flows))
    )
    files = (Path(where.rsplit(":", 1)[0]) for where in declared if ":" in where)
    return [file for file in dict.fromkeys(files) if file.is_file()]


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
