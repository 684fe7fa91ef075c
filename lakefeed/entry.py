"""``lakefeed.run``, ``validate``, ``verify``, ``plan``: the one entry to a pipeline.

The ``lakefeed`` command calls these same functions, so a notebook, a test, an orchestrator's
Python task and the CLI run a pipeline the same way and get the same typed answer
(:mod:`lakefeed.runtime.results`)::

    import lakefeed as lf

    report = lf.validate("pipelines/iot", lakehouse="/data/lh")
    if report.ok:
        result = lf.run("pipelines/iot", lakehouse="/data/lh", mode=lf.RunMode.AVAILABLE_NOW)
        print(result.flow("silver_readings").rows_written)

``pipeline`` is a file, a folder, a list of them, or a :class:`Pipeline` already loaded;
``spark`` defaults to :func:`lakefeed.spark_session` (reused, never stopped here: the caller
owns it). The session exists before the pipeline's files are imported, as in DLT and SDP
(:mod:`lakefeed.pipeline.loader`): a default one is started from what :func:`find` learns
without running them (name, spec, lakehouse, object-store locations). ``run`` and ``verify``
raise :class:`PipelineError` for a pipeline that cannot start; ``validate`` returns those
problems instead, since finding them is its job.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lakefeed.compat import dlt, sdp
from lakefeed.core.lakehouse import DEFAULT_ROOT, Lakehouse
from lakefeed.pipeline import loader
from lakefeed.pipeline.api import Pipeline, set_config
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import DatasetKind, RunMode
from lakefeed.pipeline.loader import PipelineFiles, Surface, default_name, find_pipeline
from lakefeed.pipeline.sinks import Sink
from lakefeed.runtime.results import (
    DatasetInfo,
    Edge,
    FlowInfo,
    RunResult,
    SinkInfo,
    UpgradePlan,
    ValidationResult,
    VerifyResult,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakefeed.runtime.validate import Validation

PathLike = str | os.PathLike[str]
PipelineSource = Pipeline | PathLike | Sequence[PathLike]

SURFACES: tuple[Surface, ...] = (dlt.installed, sdp.registering)
"""What a pipeline file may import besides lakefeed while it loads: DLT's ``import dlt`` and
SDP's ``from pyspark import pipelines as dp`` (the loader itself knows neither)."""


def load_pipeline(
    paths: PathLike | Sequence[PathLike],
    name: str | None = None,
    spark: SparkSession | None = None,
) -> Pipeline:
    """``lakefeed.load_pipeline``: :func:`lakefeed.pipeline.loader.load_pipeline` with DLT's
    and SDP's APIs importable by the files (:data:`SURFACES`); ``paths`` one file or folder,
    or several, as :func:`run` takes them."""
    return loader.load_pipeline(_paths(paths), name, spark, SURFACES)


def find(
    pipeline: PathLike | Sequence[PathLike], conf: Mapping[str, str] | None = None
) -> PipelineFiles:
    """The pipeline's files, name and spec, without running its code (what its session is
    started from); ``conf`` is what ``lf.config`` reads."""
    if conf is not None:
        set_config(conf)
    return find_pipeline(_paths(pipeline))


def load(
    pipeline: PipelineSource,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
) -> Pipeline:
    """The pipeline itself, or the one its files declare, imported on ``spark`` (else the
    running session); ``conf`` is what ``lf.config`` reads."""
    if conf is not None:
        set_config(conf)
    if isinstance(pipeline, Pipeline):
        return pipeline
    return load_pipeline(_paths(pipeline), spark=spark)


@contextmanager
def open_pipeline(
    pipeline: PipelineSource,
    lakehouse: Lakehouse | PathLike | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
) -> Iterator[tuple[Pipeline, Lakehouse, SparkSession]]:
    """The session first (``spark``, else one started for the pipeline), then the pipeline's
    code imported once on it, and its lakehouse. Files are loaded with ``conf`` alone (then
    their spec's configuration): what an earlier pipeline of the process set never carries
    over; a loaded :class:`Pipeline` keeps the configuration it was loaded with unless given.
    The Spark confs the pipeline sets on the session last until the block ends
    (:func:`~lakefeed.spark.session.conf_restored`): a shared session is as it was after."""
    if conf is not None or not isinstance(pipeline, Pipeline):
        set_config(conf or {})
    found = pipeline if isinstance(pipeline, Pipeline) else find(pipeline)
    house = lakehouse_for(lakehouse, found)
    session = spark or _session(master, found, house)
    # deferred: the CLI imports this module at start; pyspark loads when a pipeline opens
    from lakefeed.spark.session import conf_restored

    with conf_restored(session):
        yield load(pipeline, spark=session), house, session


def run(
    pipeline: PipelineSource,
    *,
    lakehouse: Lakehouse | PathLike | None = None,
    mode: RunMode | str = RunMode.AVAILABLE_NOW,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
    trigger_interval: str = "5 seconds",
    duration: float | None = None,
    full_refresh: Iterable[str] = (),
    full_refresh_all: bool = False,
    max_restarts: int = 5,
) -> RunResult:
    """Run the pipeline in ``mode``; per flow, how it ended and the rows it committed.

    ``continuous`` runs until SIGINT/SIGTERM or ``duration`` seconds; the other modes end when
    their input is processed. ``full_refresh`` names tables to reset first (data, quarantine,
    checkpoint); ``full_refresh_all`` resets every table.
    """
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.runtime.runner import PipelineRunner, RunOptions

    options = RunOptions(
        mode=mode,
        trigger_interval=trigger_interval,
        duration=duration,
        full_refresh=tuple(full_refresh),
        full_refresh_all=full_refresh_all,
        max_restarts=max_restarts,
    )
    with open_pipeline(pipeline, lakehouse, conf, spark, master) as (loaded, house, session):
        return PipelineRunner(loaded, house, session, options).run()


def validate(
    pipeline: PipelineSource,
    *,
    lakehouse: Lakehouse | PathLike | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
    check_connections: bool = False,
) -> ValidationResult:
    """The graph, each flow's output mode and every problem, without starting a query.

    A pipeline that does not even load (a syntax error, a duplicate name) is a result with
    problems and no datasets; Spark is not started for one whose files cannot be found or
    compiled. ``check_connections``
    also asks each outside source (Kafka brokers, input paths, Delta source tables) whether it
    answers; a failed check is a problem.
    """
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.runtime.validate import validate as check

    with ExitStack() as opened:
        try:
            loaded, house, session = opened.enter_context(
                open_pipeline(pipeline, lakehouse, conf, spark, master)
            )
        except PipelineError as error:
            return ValidationResult(pipeline=_name(pipeline), problems=tuple(error.problems))
        validation = check(loaded, house, session)
    result = _validation_result(loaded, validation)
    if not check_connections:
        return result
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.runtime.connections import check_connections as ask

    checks = tuple(ask(validation.sources))
    failed = tuple(f"flow {c.flow!r}: {c.target}: {c.detail}" for c in checks if not c.ok)
    return dataclasses.replace(result, connections=checks, problems=result.problems + failed)


def verify(
    pipeline: PipelineSource,
    *,
    lakehouse: Lakehouse | PathLike | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
    run_first: bool = True,
) -> VerifyResult:
    """Each table's streaming result against a batch recompute over the same input.

    ``run_first`` brings the stream up to date first (an available-now run); without it the
    tables are compared as they are.
    """
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.runtime.verify import verify as compare

    with open_pipeline(pipeline, lakehouse, conf, spark, master) as (loaded, house, session):
        tables = compare(loaded, house, session, run_first=run_first)
    return VerifyResult(pipeline=loaded.name, tables=tuple(tables))


def plan(
    pipeline: PipelineSource,
    *,
    lakehouse: Lakehouse | PathLike | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    master: str | None = None,
) -> UpgradePlan:
    """Before a deploy: what a run of this code would do with each flow the lakehouse holds.

    Nothing is written. ``ok`` is False when ``run`` would refuse (a checkpoint reset or a full
    refresh is needed, or the pipeline itself has problems); each flow says why and what would
    be read again.
    """
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.runtime.upgrade import plan_upgrade

    with open_pipeline(pipeline, lakehouse, conf, spark, master) as (loaded, house, session):
        return plan_upgrade(loaded, house, session)


# -- helpers


def _paths(pipeline: PathLike | Sequence[PathLike]) -> list[str | Path]:
    items = [pipeline] if isinstance(pipeline, str | os.PathLike) else list(pipeline)
    return [item if isinstance(item, str) else Path(item) for item in items]


def _name(pipeline: PipelineSource) -> str:
    if isinstance(pipeline, Pipeline):
        return pipeline.name
    paths = _paths(pipeline)
    return default_name(paths) if paths else "pipeline"


def lakehouse_for(
    lakehouse: Lakehouse | PathLike | None, pipeline: Pipeline | PipelineFiles
) -> Lakehouse:
    """The lakehouse given, else the ``storage`` of the pipeline's spark-pipeline.yml (as
    ``spark-pipelines`` keeps its checkpoints there), else ``./lakehouse``."""
    if isinstance(lakehouse, Lakehouse):
        return lakehouse
    return Lakehouse.at(lakehouse or pipeline.storage or DEFAULT_ROOT)


def storage_locations(pipeline: Pipeline | PipelineFiles, lakehouse: Lakehouse) -> list[str]:
    """Where the pipeline keeps, reads or writes data, known before a session starts: the
    lakehouse root and the object-store URIs the pipeline names
    (:mod:`lakefeed.pipeline.locations`). The session adds S3A when one is on object storage
    (:func:`lakefeed.session.spark_session`'s ``storage``)."""
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.pipeline.locations import pipeline_locations

    return [str(lakehouse.root), *pipeline_locations(pipeline)]


def _session(
    master: str | None, pipeline: Pipeline | PipelineFiles, lakehouse: Lakehouse
) -> SparkSession:
    # deferred: the CLI imports this module at start; the runtime loads when a run does
    from lakefeed.session import spark_session

    return spark_session(
        app_name=f"lakefeed-{pipeline.name}",
        master=master,
        storage=storage_locations(pipeline, lakehouse),
    )


def _sink_info(sink: Sink | None) -> SinkInfo | None:
    """A sink for the JSON document: never its secrets."""
    if sink is None:
        return None
    return SinkInfo(sink.format, sink.describe(), sink.shown_options)


def _validation_result(pipeline: Pipeline, check: Validation) -> ValidationResult:
    graph = check.graph
    broken = bool(graph.problems())
    order = () if broken else tuple(graph.order())
    datasets = tuple(
        DatasetInfo(
            name=name,
            kind=DatasetKind(dataset.kind),
            source=dataset.source,
            comment=dataset.comment,
            partition_cols=tuple(dataset.partition_cols),
            table_properties=dict(dataset.table_properties),
            expectations=tuple(rule.name for rule in dataset.expectations),
            reads=graph.nodes[name].reads if name in graph.nodes else (),
            sink=_sink_info(dataset.sink),
        )
        for name, dataset in pipeline.datasets.items()
    )
    flows = tuple(
        FlowInfo(
            name=plan.name,
            kind=DatasetKind(plan.kind),
            output_mode=plan.output_mode,
            streaming=plan.facts.streaming,
            aggregate=plan.facts.aggregate,
            watermark=plan.facts.watermark,
            stateful=tuple(plan.facts.stateful),
        )
        for dataset in (order or tuple(pipeline.datasets))
        for name in pipeline.flow_names(pipeline.datasets[dataset])
        if (plan := check.flows.get(name)) is not None
    )
    return ValidationResult(
        pipeline=pipeline.name,
        datasets=datasets,
        flows=flows,
        edges=tuple(Edge(source, target) for source, target in graph.edges),
        order=order,
        problems=tuple(check.problems),
        warnings=tuple(check.warnings),
        causes=dict(check.causes),
    )
