"""What a person sees of a running pipeline: event log, logs, metrics, the web UI."""
