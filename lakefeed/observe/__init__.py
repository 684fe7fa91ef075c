"""What a person sees of a running pipeline: event log, logs, metrics, the web UI.

Everything here reads the lakehouse folder only (the event log and the Delta tables), so it
works for a pipeline running in this process, in another process, or one that has stopped:

- :mod:`.figures` folds event-log events into per-flow figures (rates, batch duration,
  end-to-end latency, watermark delay, state size, late drops, Kafka lag, backpressure, state)
  and per-table expectation counts. The three views below all use it, so they agree.
- :mod:`.server`: ``start_server(lakehouse, host, port, token)`` serves the web UI (pipeline
  graph, live per-flow charts, data quality, a live chart of any table) and Prometheus
  ``/metrics`` (``lakefeed_flow_*{pipeline, flow}``, ``lakefeed_expectation_rows_total``,
  ``lakefeed_quarantined_rows_total``). ``lakefeed ui`` and ``lakefeed run --ui`` use it.
- :mod:`.console`: the rich tables of ``lakefeed status`` and ``lakefeed events``.
- :mod:`.tail` follows the event log incrementally; :mod:`.tables` reads Delta tables for the
  live table view; :mod:`.graph` lays out the pipeline graph.
"""
