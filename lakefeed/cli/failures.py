"""How the ``lakefeed`` command ends when something fails: one clear message, no trace.

Every command runs inside :class:`FailureReporting`: an exception that escapes becomes the
message :func:`lakefeed.core.explain.explain` finds in it (what failed, where, the fix) and exit 1;
the full Python and JVM trace is printed only with the global ``--debug`` flag. Spark's own log
lines that dump the same failure's JVM stack (a failed task, a terminated query) are silenced
unless ``--debug`` is given, since lakefeed reports that failure itself.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
from rich.console import Console

from lakefeed.core.explain import explain
from lakefeed.core.logs import set_spark_log_level

console = Console(stderr=True)
DEBUG_KEY = "lakefeed.debug"

# JVM loggers that print a whole stack for a failure lakefeed reports in one line.
_STACK_DUMPING_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming",
    "org.apache.spark.sql.execution.datasources",  # FileFormatWriter: "Aborting job"
    "org.apache.spark.sql.execution.python",
    "org.apache.spark.util.Utils",  # "Aborting task"
    "org.apache.spark.api.python",
    "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter",  # a failed task's leftovers
)


def debugging() -> bool:
    """Whether the global ``--debug`` flag was given (False outside a command)."""
    context = click.get_current_context(silent=True)
    return bool(context is not None and context.meta.get(DEBUG_KEY))


def report(error: BaseException) -> None:
    """Print what failed (and, with ``--debug``, the full trace) to stderr."""
    failure = explain(error)
    if debugging():
        console.print(failure.trace, markup=False, highlight=False)
    console.print("[bold red]error:[/] ", end="")
    console.print(str(failure), markup=False, highlight=False)
    if not debugging():
        console.print("(run with --debug for the full trace)", style="dim", highlight=False)


def quiet_spark_failure_logs(spark: Any) -> None:
    """Silence Spark's stack-dumping log lines for failures lakefeed reports (not with --debug)."""
    if debugging():
        return
    # pyspark logs each analysis error with its JVM trace before raising it
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    set_spark_log_level(spark, _STACK_DUMPING_LOGGERS, "OFF")


class FailureReporting(click.Group):
    """A group whose commands end in :func:`report` and exit 1 instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            report(error)
            sys.exit(1)
