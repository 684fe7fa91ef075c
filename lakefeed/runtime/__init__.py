"""Running a pipeline: run modes, restarts with backoff, event log writing."""
