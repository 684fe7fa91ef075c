"""AUTO CDC (DLT's ``create_auto_cdc_flow`` / ``apply_changes``): a change stream applied to a
Delta table as SCD type 1 (current rows) or SCD type 2 (history with ``__START_AT``/``__END_AT``).

``spec`` holds the declaration and its checks (Spark-free), ``fold`` the per-key rules that turn
one micro-batch of changes into the key's new rows (Spark-free, run on executors), and ``apply``
the ``foreachBatch`` that groups a batch by key and MERGEs the result exactly once.
"""
