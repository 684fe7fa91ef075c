"""The parts of a pipeline run, each readable alone, that
:class:`~lakefeed.runtime.runner.PipelineRunner` composes (as Quix Streams' ``Application``
composes its consumer, producer and managers):

- :mod:`.context`: what every part shares: the options, the flows' states, the stop flag;
- :mod:`.refresh`: ``--full-refresh`` and the version guard before it;
- :mod:`.checkpoints`: a flow's checkpoint guard (is it this flow's, would it duplicate rows);
- :mod:`.prepare`: every flow planned, its table created and its checkpoint guarded, or none starts;
- :mod:`.writers`: the sink builder: what a flow's query writes into (late rows are wired there);
- :mod:`.starter`: starting a flow's query;
- :mod:`.supervisor`: a failed flow's restarts with backoff;
- :mod:`.modes`: one strategy per run mode (continuous, available-now, once, backfill);
- :mod:`.batch`: batch writes (materialized views, ``once`` and snapshot flows, backfills);
- :mod:`.stopping`: stopping the queries at the end of their running batch;
- :mod:`.signals`: SIGINT/SIGTERM while a run holds the process;
- :mod:`.outcome`: the :class:`~lakefeed.RunResult` a run returns.
"""
