"""Run a docs page's Python and SQL blocks, in order, as a reader would (with Sybil).

A page is one namespace, as a reader's session is: a later block uses what an earlier one
defined. Its blocks run in a temporary folder (the working directory), with ``spark`` (the
shared test session, compatibility surfaces on, as ``lf.spark_session()`` gives), ``lf`` and
``F`` already there. Pipeline code (``@lf.table``, ``lf.create_sink``, pipeline SQL) declares
into the page's pipeline, which is then validated on Spark (``lf.validate``: every flow's
function runs and Spark analyses its query) on a temporary lakehouse; a plain SQL block runs
statement by statement through ``spark.sql``.

What a page's blocks assume and the page does not show (a table to read, a file to land) is an
invisible block in the page itself, next to the block that needs it::

    <!-- invisible-code-block: python
    spark.range(3).write.format("delta").save("data/events")
    -->

The Markdown directives (Sybil's):

- ``<!-- skip: next "why" -->``: the next block cannot run here (a cluster, S3 credentials, a
  broker on another host); the reason is required, and the test counts them;
- ``<!-- clear-namespace -->``: what follows is another example: the pipeline so far is
  validated and a new one starts, with a fresh namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import SkipTest

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sybil import Document, Example, Sybil
from sybil.parsers.abstract.lexers import LexerCollection
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer
from sybil.region import Region

import lakefeed as lf
from lakefeed.core.config import LAKEHOUSE
from lakefeed.entry import SURFACES
from lakefeed.pipeline.api import Pipeline, loading, set_config
from lakefeed.pipeline.loader import add_sql
from lakefeed.pipeline.sql import parse_sql
from lakefeed.spark.session import evaluating_on

# Pipeline SQL (DLT/SDP statements) goes into the pipeline; any other SQL runs on the session.
PIPELINE_SQL = re.compile(
    r"\b(STREAMING\s+TABLE|MATERIALIZED\s+VIEW|APPLY\s+CHANGES|AUTO\s+CDC|CREATE\s+FLOW)\b", re.I
)


class PageRun:
    """The state of one page's run: its folder, session, current pipeline and skip count."""

    def __init__(self, name: str, folder: Path, spark: SparkSession) -> None:
        self.name, self.folder, self.spark = name, folder, spark
        self.skipped = 0
        self.validated: list[lf.ValidationResult] = []
        self.pipeline = Pipeline(name)

    def fresh_namespace(self) -> dict[str, Any]:
        return {"spark": self.spark, "lf": lf, "F": F}

    def sql(self, text: str, where: str) -> None:
        if PIPELINE_SQL.search(text):
            for flow in parse_sql(text, source=where):
                add_sql(self.pipeline, flow)
            return
        for statement in _statements(text):
            self.spark.sql(statement).collect()

    def finish_pipeline(self) -> None:
        """Validate the pipeline declared so far (if any), then start another."""
        if self.pipeline.datasets:
            problems = self.pipeline.link_flows()
            assert problems == [], f"{self.name}: {problems}"
            lakehouse = self.folder / f"lakehouse-{len(self.validated)}"
            result = lf.validate(self.pipeline, lakehouse=lakehouse, spark=self.spark)
            assert result.ok, f"{self.name}: {result.problems}"
            self.validated.append(result)
        self.pipeline = Pipeline(self.name)


def _statements(text: str) -> list[str]:
    """A block's statements: ``--`` comments dropped, split at ``;`` ending a line or a part."""
    lines = [re.sub(r"\s*--.*$", "", line) for line in text.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


class Page(Document):
    """A Markdown page whose examples run with a :class:`PageRun` (``run``, set by the test)."""

    run: PageRun


def _sql(example: Example) -> None:
    page = example.document
    assert isinstance(page, Page)
    page.run.sql(textwrap.dedent(str(example.parsed)), f"{Path(page.path).name}:{example.line}")


def _clear(example: Example) -> None:
    page = example.document
    assert isinstance(page, Page)
    page.run.finish_pipeline()
    page.namespace.clear()
    page.namespace.update(page.run.fresh_namespace())


class ClearParser:
    """``<!-- clear-namespace -->``: the pipeline so far is done; a fresh namespace follows."""

    def __init__(self) -> None:
        self.lexers = LexerCollection([DirectiveInHTMLCommentLexer("clear-namespace")])

    def __call__(self, document: Document) -> Iterator[Region]:
        for lexed in self.lexers(document):
            yield Region(lexed.start, lexed.end, None, _clear)


SYBIL = Sybil(
    parsers=[
        PythonCodeBlockParser(),
        CodeBlockParser(language="sql", evaluator=_sql),
        SkipParser(),
        ClearParser(),
    ],
    document_types={".md": Page},
)


def parse(path: Path) -> Page:
    page = SYBIL.parse(path)
    assert isinstance(page, Page)
    return page


@contextlib.contextmanager
def _inside(folder: Path, spark: SparkSession) -> Iterator[None]:
    """``folder`` as the working directory of Python and of the JVM's local file system (so a
    relative path means the same file to ``open`` and to Spark), ``folder/lakehouse`` as the
    lakehouse names resolve in. At the end the streams a page started are stopped and the
    session's settings are as before (``lf.spark_session()`` in a page reuses the shared
    session and applies lakefeed's defaults to it)."""
    jvm = spark._jvm
    assert jvm is not None
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before, jvm_before = Path.cwd(), local.getWorkingDirectory()
    user_dir = jvm.java.lang.System.getProperty("user.dir")
    os.chdir(folder)
    local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(folder.as_uri()))
    jvm.java.lang.System.setProperty("user.dir", str(folder))  # FileContext's (checkpoints)
    settings = dict(spark.conf.getAll)
    spark.conf.set(LAKEHOUSE.key, str(folder / "lakehouse"))
    try:
        yield
    finally:
        for query in spark.streams.active:
            query.stop()
        _restore(spark, settings)
        jvm.java.lang.System.setProperty("user.dir", user_dir)
        local.setWorkingDirectory(jvm_before)
        os.chdir(before)


def _restore(spark: SparkSession, settings: dict[str, str]) -> None:
    """The session's runtime settings back to ``settings`` (static ones cannot change)."""
    for key, value in dict(spark.conf.getAll).items():
        with contextlib.suppress(AnalysisException):  # CANNOT_MODIFY_CONFIG: a static one
            if key not in settings:
                spark.conf.unset(key)
            elif settings[key] != value:
                spark.conf.set(key, settings[key])


def run_page(path: Path, folder: Path, spark: SparkSession) -> PageRun:
    """Every example of the page in order; skipped ones counted, the last pipeline validated."""
    page = parse(path)
    page.run = run = PageRun(path.name, folder, spark)
    page.namespace.update(run.fresh_namespace())
    set_config({})
    with _inside(folder, spark), evaluating_on(spark):
        for example in page:
            with loading(run.pipeline), contextlib.ExitStack() as surfaces:
                for surface in SURFACES:  # dlt and SDP files declare into the pipeline too
                    surfaces.enter_context(surface())
                try:
                    example.evaluate()
                except SkipTest:
                    run.skipped += 1
        run.finish_pipeline()
    return run
