"""A flow's failures: each recorded once, then a restart after an exponential backoff, unless
the error's code says retrying cannot help or the flow's restarts are used up. A flow that
fails never fails the run by itself: in a continuous run the others keep running; a triggered
run stops before the flows that read it."""

from __future__ import annotations

import contextlib
import time

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

from lakefeed.core.explain import Failure, explain
from lakefeed.core.logs import get_logger
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.run.context import FlowState, RunContext
from lakefeed.runtime.run.starter import FlowStarter

log = get_logger(__name__)


class Supervisor:
    """Watches the run's queries and restarts the failed ones (``max_restarts``, backoff)."""

    def __init__(self, run: RunContext, starter: FlowStarter) -> None:
        self.run = run
        self.starter = starter

    def run_to_end(self, state: FlowState, trigger: dict) -> bool:
        """Run one flow to its end, restarting on failure; False when the run is stopping."""
        stop = self.run.stop
        while True:
            query = self.starter.start(state, trigger)
            self._await(query)
            if stop.is_set():
                return False
            if self.finished(state):
                return True
            if state.failed:
                raise PipelineError(
                    [f"flow {state.name!r} failed: {state.error}; downstream flows were not run"]
                )
            self._sleep_until(state.restart_at or 0)

    def watch(self, now: float, trigger: dict) -> None:
        """One look at every flow of a continuous run: an ended query is handled, a recovered
        one gets a fresh restart budget, a due restart is made."""
        for state in self.run.flows.values():
            if state.query is not None and not state.query.isActive:
                self.finished(state)
            elif state.query is not None and state.attempts and state.query.lastProgress:
                state.attempts = 0  # it recovered: later failures get a fresh budget
            if state.restart_at is not None and now >= state.restart_at:
                state.restart_at = None
                self._restart(state, trigger)

    def finished(self, state: FlowState) -> bool:
        """Handle a query that ended: True if it ended cleanly, else schedule a restart."""
        query = state.query
        assert query is not None
        self.run.catch_up(query)
        error = query.exception()
        state.query = None
        name, target = state.name, state.dataset.name
        if error is None:
            self.run.events.emit(
                "flow_stop", f"{name} stopped", flow=name, details={"target": target}
            )
            return True
        self._failed(state, explain(error), "failed")
        return False

    def _restart(self, state: FlowState, trigger: dict) -> None:
        """A restart that cannot even start (e.g. the source is still down) counts as a failure
        of the flow, never of the whole run."""
        try:
            self.starter.start(state, trigger)
        except Exception as error:
            self._failed(state, explain(error), "could not restart")

    def _failed(self, state: FlowState, failure: Failure, what: str) -> None:
        """Record a flow's failure; restart it with backoff unless its error is permanent (its
        code says retrying cannot help) or its restarts are used up. One log line each time."""
        name, limit = state.name, self.run.options.max_restarts
        state.error = str(failure)
        self.run.events.emit(
            "flow_failed",
            f"{name} {what}: {failure}",
            flow=name,
            level="ERROR",
            details={
                "error": str(failure),
                "code": failure.code,
                "permanent": failure.permanent,
                "traceback": failure.trace,
            },
        )
        if failure.permanent or state.attempts >= limit:
            state.failed = True
            why = "permanent error, not retried" if failure.permanent else "no restarts left"
            log.error(f"flow {name!r} {what}: {failure} ({why})")
            return
        delay = self._backoff(state)
        state.attempts += 1
        state.restart_at = time.monotonic() + delay
        log.warning(
            f"flow {name!r} {what}: {failure}; restart {state.attempts}/{limit} in {delay:.1f}s"
        )
        self.run.events.emit(
            "flow_restart",
            f"{name}: restart {state.attempts}/{limit} in {delay:.1f}s",
            flow=name,
            details={
                "attempt": state.attempts,
                "delay_s": delay,
                "checkpoint": str(self.run.lakehouse.checkpoint_path(name)),
                "target": state.dataset.name,
            },
        )

    def _backoff(self, state: FlowState) -> float:
        options = self.run.options
        return min(options.restart_backoff * 2**state.attempts, options.max_backoff)

    def _await(self, query: StreamingQuery) -> None:
        """Wait for the query to end; its error, if any, is handled by ``finished``."""
        while query.isActive and not self.run.stop.is_set():
            with contextlib.suppress(StreamingQueryException):
                query.awaitTermination(1)
            self.run.tick()

    def _sleep_until(self, when: float) -> None:
        while time.monotonic() < when and not self.run.stop.is_set():
            self.run.stop.wait(0.2)
