"""Load pipeline files (Python and SQL, or a folder of them) into one :class:`Pipeline`.

As in DLT and Spark Declarative Pipelines, the Spark session exists before any pipeline code
runs: a file's module level may call ``SparkSession.active()``, build ``col()``/``expr()``
arguments, read ``spark.conf.get(...)`` or a small lookup table. So a pipeline is opened in two
steps: :func:`find_pipeline` learns what the session is started from without running any of the
user's code (its files, name, spec, and what Python cannot even compile), then
:func:`load_pipeline` imports the files once, on that session, with the pipeline's
configuration set as its Spark confs (``spark.conf.get`` reads them, as in DLT and SDP).

While the files are imported, the compatibility surfaces the caller passes (:class:`Surface`:
``import dlt``, SDP's ``from pyspark import pipelines as dp``) are installed; the loader knows
none of them, so the pipeline model stands without :mod:`lakefeed.compat`, whose surfaces
:func:`lakefeed.load_pipeline` (:mod:`lakefeed.entry`) passes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lakefeed.connectors.files import read_files
from lakefeed.connectors.files.sql import sql_files_read
from lakefeed.connectors.registry import active_spark
from lakefeed.core.errors import ConfigError, DeltaError, LakefeedError, PipelineDefinitionError
from lakefeed.core.explain import explain
from lakefeed.delta import properties
from lakefeed.pipeline.api import (
    AppendFlow,
    Dataset,
    Pipeline,
    auto_cdc_flow,
    config,
    config_defaults,
    config_keys,
    dataset_named,
    loading,
    read,
    read_stream,
)
from lakefeed.pipeline.errors import FIXED_CONF, NO_SESSION
from lakefeed.pipeline.expectations import check_unique
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.spec import PipelineSpec, find_spec, read_spec
from lakefeed.pipeline.sql import SqlFlow, parse_sql_file, sql_query_error
from lakefeed.spark.session import evaluating_on, evaluating_session
from lakefeed.sql.references import FilesRead
from lakefeed.sql.tokens import tokens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakefeed.core.storage import AnyPath

SUFFIXES = (".py", ".sql")


class Surface(Protocol):
    """A compatibility surface made available while a pipeline's files are imported: called
    once the pipeline being loaded is current (:func:`lakefeed.pipeline.api.current_pipeline`),
    it gives the context that installs it and takes it out again."""

    def __call__(self) -> contextlib.AbstractContextManager[object]: ...


@dataclass(frozen=True)
class PipelineFiles:
    """A pipeline as known before any of its code runs: what its Spark session starts from."""

    files: tuple[Path, ...]
    name: str
    spec: PipelineSpec | None = None

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.spec.configuration) if self.spec else {}

    @property
    def storage(self) -> AnyPath | None:
        return self.spec.storage if self.spec else None


def find_pipeline(paths: Iterable[str | Path], name: str | None = None) -> PipelineFiles:
    """The pipeline's files, name and spec, without running any of its code; files Python
    cannot compile are refused here, so a typo costs no Spark start."""
    paths = list(paths)
    files = pipeline_files(paths)
    spec = _spec(paths)
    problems = [p for file in files if file.suffix == ".py" and (p := _syntax_problem(file))]
    if problems:
        raise PipelineError(problems)
    return PipelineFiles(tuple(files), name or (spec.name if spec else default_name(paths)), spec)


def _syntax_problem(file: Path) -> str | None:
    try:
        compile(file.read_bytes(), str(file), "exec")
    except SyntaxError as error:
        return f"{_location(file, error)}: SyntaxError: {error.msg}"
    return None


def pipeline_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files of the pipeline, a folder expanding to its ``.py``/``.sql`` files by name (a spec
    or a folder holding one, to the files its ``libraries`` name)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (spec := find_spec(path)) is not None:
            files.extend(read_spec(spec).files)
        elif path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.iterdir()
                    if p.suffix in SUFFIXES and not p.name.startswith(("_", "."))
                )
            )
        elif path.is_file() and path.suffix in SUFFIXES:
            files.append(path)
        elif path.exists():
            raise PipelineError([f"{path}: a pipeline file must end in .py or .sql"])
        else:
            raise PipelineError([f"{path}: no such file or folder"])
    if not files:
        raise PipelineError([f"no .py or .sql pipeline files in {', '.join(map(str, paths))}"])
    return files


def load_pipeline(
    paths: Iterable[str | Path],
    name: str | None = None,
    spark: SparkSession | None = None,
    surfaces: Iterable[Surface] = (),
) -> Pipeline:
    """Import every file once, on ``spark`` (else the running session), with ``surfaces``
    installed; problems of all files are reported together.

    The files' ``spark`` global is that session, and the pipeline's configuration (the spec's,
    under ``lakefeed.config``'s) is set as its Spark confs first. Without any session (a
    Spark-free look at the declarations) a file touching Spark at import is refused with
    :data:`NO_SESSION`; ``lakefeed run`` and ``lakefeed.run`` always load on their session.
    """
    found = find_pipeline(paths, name)
    pipeline = Pipeline(found.name)
    if found.spec is not None:
        pipeline.configuration, pipeline.storage = found.configuration, found.storage
        pipeline.namespace = found.spec.namespace
        config_defaults(found.configuration)
    session = spark or _running_session()
    if session is not None:
        try:
            apply_configuration(session, {key: str(config(key)) for key in config_keys()})
        except ConfigError as error:
            raise PipelineError([str(error)]) from error
    problems: list[str] = []
    with contextlib.ExitStack() as installed:
        installed.enter_context(loading(pipeline))
        for surface in surfaces:
            installed.enter_context(surface())
        installed.enter_context(_evaluating(session))
        for file in found.files:
            try:
                if file.suffix == ".sql":
                    for flow in parse_sql_file(file):
                        add_sql(pipeline, flow)
                else:
                    _exec_python(file, session)
            except PipelineError as error:
                problems.extend(error.problems)
    problems.extend(pipeline.link_flows())
    for dataset in pipeline.datasets.values():
        try:
            check_unique(dataset.expectations, dataset.name)
        except ValueError as error:
            problems.append(str(error))
        try:
            properties.check(dataset.name, dataset.table_properties)
            properties.check_protocol(dataset.name, dataset.table_properties)
        except (ConfigError, DeltaError) as error:
            problems.append(f"{dataset.source}: {error}")
    if not pipeline.datasets and not problems:
        problems.append(
            f"{', '.join(map(str, found.files))} declare no dataset: decorate flow functions with "
            "@lf.table, @lf.materialized_view or @lf.view"
        )
    if problems:
        raise PipelineError(problems)
    return pipeline


def _spec(paths: list[str | Path]) -> PipelineSpec | None:
    """The spec among ``paths``, if any (its name, configuration and storage are the
    pipeline's)."""
    found = [spec for p in paths if (spec := find_spec(Path(p))) is not None]
    return read_spec(found[0]) if found else None


def add_sql(pipeline: Pipeline, flow: SqlFlow) -> None:
    """One SQL statement's dataset, append flow, AUTO CDC flow, or a dataset and its flow;
    its name as the pipeline keeps it (``sales.orders`` in database ``sales``: ``orders``)."""
    try:
        flow.name = pipeline.namespace.own(flow.name, flow.source)
    except PipelineDefinitionError as error:  # reported with the other files' problems
        raise PipelineError([str(error)]) from error
    if flow.append:
        name = flow.flow_name or flow.name
        pipeline.add_flow(
            AppendFlow(
                name, flow.name, lambda: run_sql_flow(flow), flow.once, flow.comment, flow.source
            )
        )
        return
    if flow.cdc is None or flow.declared:
        pipeline.add(sql_dataset(flow))
    if flow.cdc is not None:
        pipeline.add_flow(
            auto_cdc_flow(flow.source, flow.name, flow.flow_name, flow.once, **flow.cdc)
        )


def sql_dataset(flow: SqlFlow) -> Dataset:
    """A SQL statement's dataset: its query, or none for a table its flows fill."""
    return Dataset(
        name=flow.name,
        kind=flow.kind,
        func=_no_query(flow.name) if flow.declared else lambda: run_sql_flow(flow),
        comment=flow.comment,
        partition_cols=flow.partition_cols,
        cluster_by=flow.cluster_by,
        table_properties=flow.table_properties,
        expectations=flow.expectations,
        source=flow.source,
        sql=None if flow.declared else flow,
        declared=flow.declared,
    )


def _no_query(name: str) -> Callable[[], DataFrame]:
    def no_query() -> DataFrame:
        raise PipelineError([f"streaming table {name!r} is filled by its flows"])

    return no_query


def run_sql_flow(flow: SqlFlow):  # noqa: ANN201 - DataFrame, imported lazily
    """Evaluate a SQL flow: each referenced dataset becomes a temp view, then ``spark.sql``."""

    spark = active_spark()  # the runner's while it evaluates: where the temp views are made
    views: dict[tuple[str, bool], str] = {}
    tag = flow.flow_name or flow.name  # two flows into one table: their views apart
    for name in flow.stream_reads:
        stream = _read_if_defined(name, streaming=True)
        if stream is None:  # STREAM of a table outside the pipeline: Spark's, as in SDP
            stream = _spark_stream(spark, flow, name)
        views[(name, True)] = _temp_view(stream, tag, name, "s")
    for name in flow.batch_reads:
        df = _read_if_defined(name, streaming=False)
        if df is not None:
            views[(name, False)] = _temp_view(df, tag, name, "b")
    file_views = [
        _temp_view(_files(flow, files), tag, str(number), "f")
        for number, files in enumerate(flow.files)
    ]
    try:
        return spark.sql(flow.render(views, file_views))
    except Exception as error:  # Spark's analysis/parse errors: at the .sql file's line
        raise sql_query_error(flow, error, explain(error).message) from error


def _files(flow: SqlFlow, files: FilesRead):  # noqa: ANN202 - DataFrame, imported lazily
    """A files read of ``flow``'s query through :func:`lakefeed.read_files`; its ``_metadata``
    column, hidden in Databricks (``SELECT *`` leaves it out), only where the query names it."""
    try:
        read = sql_files_read(files.function, files.args, files.named)
    except LakefeedError as error:
        raise PipelineError([f"{flow.path}:{flow.query_line}: {error}"]) from error
    frame = read_files(read.path, read.format, schema=read.schema, **read.options)
    named = any(t.upper == "_METADATA" for t in tokens(flow.query))
    return frame if named else frame.drop("_metadata")


def _spark_stream(spark: SparkSession, flow: SqlFlow, name: str):  # noqa: ANN202
    try:
        return spark.readStream.table(name)
    except Exception as error:  # no such table, or one Spark cannot stream: at the file's line
        raise sql_query_error(flow, error, explain(error).message) from error


def _read_if_defined(name: str, streaming: bool):  # noqa: ANN202
    """``FROM x`` / ``STREAM x`` is a pipeline read only when x is a dataset (``x``, ``db.x``
    in the pipeline's database); else (None) Spark's table."""

    dataset = dataset_named(name)
    if dataset is None:
        return None
    return read_stream(dataset) if streaming else read(dataset)


def _temp_view(df, flow: str, name: str, tag: str) -> str:  # noqa: ANN001
    view = f"__lakefeed_{flow}_{tag}_{name.replace('.', '__')}"
    df.createOrReplaceTempView(view)
    return view


def apply_configuration(spark: SparkSession, values: Mapping[str, str]) -> None:
    """The pipeline configuration as Spark confs of ``spark`` (DLT's and SDP's
    ``configuration`` are Spark confs: ``spark.conf.get`` reads them). A Spark setting fixed
    when the session started that differs is refused: a pipeline would silently run without it.
    """
    for key, value in values.items():
        if spark.conf.get(key, None) == value:
            continue
        try:
            spark.conf.set(key, value)
        except Exception as error:  # CANNOT_MODIFY_CONFIG (a static or core setting), a bad value
            first = str(error).strip().split("\n")[0][:200]
            raise ConfigError(
                f"configuration {key}={value}: the running Spark session refuses it ({first})",
                fix="a setting Spark fixes at start goes in `lakefeed run --spark-conf KEY=VALUE` "
                "(or lakefeed.spark_session(conf={...})); otherwise correct the value",
                code=FIXED_CONF,
            ) from error


def _running_session() -> SparkSession | None:
    # deferred: pyspark loads only when this runs
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _evaluating(session: SparkSession | None) -> contextlib.AbstractContextManager[Any]:
    """While the files load, :func:`lakefeed.active_spark` answers with their session."""

    return evaluating_on(session) if session is not None else contextlib.nullcontext()


def _exec_python(file: Path, session: SparkSession | None) -> None:
    module_name = f"lakefeed_pipeline_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise PipelineError([f"{file}: cannot import"])
    module = importlib.util.module_from_spec(spec)
    # As in DLT notebooks and SDP files, `spark` is given: the session the pipeline runs on.
    module.__dict__["spark"] = session if session is not None else _SessionOfTheRun()
    # In sys.modules only while it runs: afterwards cloudpickle ships its functions (UDFs)
    # to workers by value, since workers cannot import a pipeline file by name.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except PipelineError as error:
        where = _location(file, error)
        raise PipelineError(
            p if str(file) in p else f"{where}: {p}" for p in error.problems
        ) from error
    except Exception as error:
        if session is None and _needs_session(error):
            raise PipelineError([f"{_location(file, error)}: {_no_session()}"]) from error
        raise PipelineError(
            [f"{_location(file, error)}: {type(error).__name__}: {error}"]
        ) from error
    finally:
        sys.modules.pop(module_name, None)


class _SessionOfTheRun:
    """The ``spark`` global of a file loaded without a session: the session that evaluates its
    flows later (the runner's). Touched while the file loads, it is refused, never started
    here: a session started by an import would lack the run's settings."""

    def __getattr__(self, name: str) -> object:

        session = evaluating_session() or _running_session()
        if session is None:
            raise _no_session()
        return getattr(session, name)

    def __repr__(self) -> str:
        return "<the SparkSession of the run>"


def _no_session() -> ConfigError:
    return ConfigError(
        "the pipeline uses Spark while it loads, and it was loaded without a Spark session",
        fix="load it on a session: lakefeed.load_pipeline(paths, spark=lakefeed.spark_session())"
        " (lakefeed run, lakefeed.run and PipelineTest do)",
        code=NO_SESSION,
    )


def _needs_session(error: BaseException) -> bool:
    """pyspark's ways of saying there is no session: NO_ACTIVE_OR_DEFAULT_SESSION, or the bare
    ``assert SparkContext._active_spark_context`` of ``col()``/``expr()``/``lit()``."""
    if getattr(error, "getErrorClass", lambda: None)() == "NO_ACTIVE_OR_DEFAULT_SESSION":
        return True
    frames = traceback.extract_tb(error.__traceback__)
    return isinstance(error, AssertionError) and bool(frames) and "pyspark" in frames[-1].filename


def _location(file: Path, error: BaseException) -> str:
    """``file:line`` of the pipeline file's frame that raised (or of the syntax error)."""
    if isinstance(error, SyntaxError) and error.lineno:
        return f"{file}:{error.lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    line = next((f for f in reversed(frames) if f.filename == str(file)), None)
    return f"{file}:{line.lineno}" if line else str(file)


def default_name(paths: list[str | Path]) -> str:
    first = Path(paths[0]).resolve()
    return first.stem if first.is_file() else first.name
