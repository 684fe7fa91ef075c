"""Load pipeline files (Python and SQL, or a folder of them) into one :class:`Pipeline`."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from lakefeed.connectors.delta import properties
from lakefeed.delta import protocol
from lakefeed.errors import ConfigError, DeltaError
from lakefeed.pipeline import dlt_compat, sdp
from lakefeed.pipeline.api import (
    Dataset,
    Pipeline,
    auto_cdc_flow,
    config_defaults,
    loading,
    read,
    read_stream,
)
from lakefeed.pipeline.expectations import check_unique
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.spec import PipelineSpec, find_spec, read_spec
from lakefeed.pipeline.sql import SqlFlow, parse_sql_file, sql_query_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SUFFIXES = (".py", ".sql")


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


def load_pipeline(paths: Iterable[str | Path], name: str | None = None) -> Pipeline:
    """Import every file; problems of all files are reported together."""
    paths = list(paths)
    files = pipeline_files(paths)
    spec = _spec(paths)
    pipeline = Pipeline(name or (spec.name if spec else default_name(paths)))
    if spec is not None:
        pipeline.configuration, pipeline.storage = spec.configuration, spec.storage
        config_defaults(spec.configuration)
    problems: list[str] = []
    with loading(pipeline), dlt_compat.installed(), sdp.registering(pipeline):
        for file in files:
            try:
                if file.suffix == ".sql":
                    for flow in parse_sql_file(file):
                        add_sql(pipeline, flow)
                else:
                    _exec_python(file)
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
            protocol.check_properties(dataset.name, dataset.table_properties)
        except (ConfigError, DeltaError) as error:
            problems.append(f"{dataset.source}: {error}")
    if not pipeline.datasets and not problems:
        problems.append(
            f"{', '.join(map(str, files))} declare no dataset: decorate flow functions with "
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
    """One SQL statement's dataset, AUTO CDC flow, or both."""
    if flow.cdc is None or flow.declared:
        pipeline.add(sql_dataset(flow))
    if flow.cdc is not None:
        pipeline.add_flow(auto_cdc_flow(flow.source, flow.name, flow.flow_name, **flow.cdc))


def sql_dataset(flow: SqlFlow) -> Dataset:
    """A SQL statement's dataset: its query, or none for a table its flows fill."""
    return Dataset(
        name=flow.name,
        kind=flow.kind,
        func=_no_query(flow.name) if flow.declared else lambda: run_sql_flow(flow),
        comment=flow.comment,
        partition_cols=flow.partition_cols,
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
    from lakefeed.session import active_spark

    spark = active_spark()  # the runner's while it evaluates: where the temp views are made
    views: dict[tuple[str, bool], str] = {}
    for name in flow.stream_reads:
        views[(name, True)] = _temp_view(read_stream(name), flow.name, name, "s")
    for name in flow.batch_reads:
        df = _read_if_defined(name)
        if df is not None:
            views[(name, False)] = _temp_view(df, flow.name, name, "b")
    try:
        return spark.sql(flow.render(views))
    except Exception as error:  # Spark's analysis/parse errors: at the .sql file's line
        from lakefeed.explain import explain

        raise sql_query_error(flow, error, explain(error).message) from error


def _read_if_defined(name: str):  # noqa: ANN202
    """A bare ``FROM x`` is a pipeline read only when x is a dataset; else Spark's table."""
    from lakefeed.pipeline.api import _RESOLVER

    resolver = _RESOLVER.get()
    known = getattr(resolver, "defines", None)
    if known is not None and not known(name):
        return None
    return read(name)


def _temp_view(df, flow: str, name: str, tag: str) -> str:  # noqa: ANN001
    view = f"__lakefeed_{flow}_{tag}_{name}"
    df.createOrReplaceTempView(view)
    return view


def _exec_python(file: Path) -> None:
    module_name = f"lakefeed_pipeline_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise PipelineError([f"{file}: cannot import"])
    module = importlib.util.module_from_spec(spec)
    module.__dict__["spark"] = _ActiveSpark()  # as in Databricks/DLT files: `spark` is given
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
        raise PipelineError(
            [f"{_location(file, error)}: {type(error).__name__}: {error}"]
        ) from error
    finally:
        sys.modules.pop(module_name, None)


class _ActiveSpark:
    """The ``spark`` global of a pipeline file: the active session, resolved on first use (a
    file that never touches it loads without starting Spark)."""

    def __getattr__(self, name: str) -> object:
        from lakefeed.session import active_spark

        return getattr(active_spark(), name)

    def __repr__(self) -> str:
        return "<the active SparkSession>"


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
