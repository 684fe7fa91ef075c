"""``--full-refresh``: the tables a run resets first, the guard that resetting them is safe,
and the reset itself (a table, its side tables and its flows' checkpoints)."""

from __future__ import annotations

from lakefeed.core.storage import remove_tree
from lakefeed.pipeline import guard, table_paths
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.run.checkpoints import written_table
from lakefeed.runtime.run.context import RunContext
from lakefeed.runtime.validate import Validation


class FullRefresh:
    """The resets a run's options ask for (``full_refresh``, ``full_refresh_all``)."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def names(self, validation: Validation) -> list[str]:
        """The tables and sinks to reset; an unknown name is a problem of the run."""
        outputs = [d.name for d in self.run.outputs(validation)]
        options = self.run.options
        names = outputs if options.full_refresh_all else list(options.full_refresh)
        problems = [
            f"--full-refresh {n}: no such table or sink in this pipeline ({', '.join(outputs)})"
            for n in names
            if n not in outputs
        ]
        if problems:
            raise PipelineError(problems)
        return names

    def check_versions(self, validation: Validation) -> None:
        """Refuse a run whose tables changed under flows that read them, unless those are
        reset too (not for a backfill, which rewrites every table anyway)."""
        run = self.run
        flows, tables = guard.lakehouse_flows(run.pipeline, run.lakehouse, validation.sources)
        guard.check_versions(flows, tables, self.names(validation))

    def apply(self, validation: Validation) -> list[str]:
        """Reset the chosen tables (``check_versions`` refused to reset a table some other
        flow has read unless that flow goes too); returns their names."""
        names = self.names(validation)
        table_paths.check_moves(self.run.pipeline, self.run.lakehouse, names)
        for name in names:
            self.reset(name)
        table_paths.record(self.run.pipeline, self.run.lakehouse)  # path=: where tables live
        return names

    def reset(self, name: str) -> None:
        """Delete a table, its side tables (quarantine, late rows, CDC state) and its
        checkpoints; of a sink, its flows' checkpoints (its data stays, as in DLT)."""
        run = self.run
        dataset = run.pipeline.datasets[name]
        for target in [name, *dataset.side_tables]:
            remove_tree(run.table(target))
        flows = run.pipeline.flow_names(dataset)
        for flow in flows:
            remove_tree(str(run.lakehouse.checkpoint_path(flow)))
        sink = written_table(run.lakehouse, dataset) if dataset.sink is not None else None
        if sink is not None:  # its flows start over, on purpose: not a lost checkpoint
            guard.forget_flows(sink, flows)
        run.events.emit(
            "flow_stop",
            f"{name}: reset for full refresh",
            flow=name,
            details={"target": name, "reason": "full_refresh"},
        )
