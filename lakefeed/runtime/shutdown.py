"""Ending a driver process whose work is done, without pyarrow's exit-time abort.

pyarrow can abort the interpreter as it exits ("terminate called without an active
exception", SIGABRT) when its native thread pools are torn down after use (apache/arrow#34314,
#39862). A driver uses pyarrow for Delta commits and stream planning, and an abort after a
successful run would tell a scheduler the run failed. So once the session is stopped and
everything is flushed, the process ends at once with the run's own exit code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys


def exit_now(code: int) -> None:
    """Flush what the process wrote, then end it with ``code`` (no interpreter teardown)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # A closed or broken pipe cannot take more output anyway.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
