"""How a benchmark leg (a subprocess, maybe in another venv) hands its figures back.

Stdlib only: the PyFlink leg imports it from its own virtual environment.
"""

from __future__ import annotations

import json
from typing import Any

PREFIX = "BENCH-RESULT "


def emit(**figures: Any) -> None:
    """Print the leg's figures as one line the runner can find in the output."""
    print(PREFIX + json.dumps(figures), flush=True)


def parse(output: str) -> dict[str, Any]:
    """The figures a leg printed; a leg that printed none failed."""
    for line in reversed(output.splitlines()):
        if line.startswith(PREFIX):
            return dict(json.loads(line[len(PREFIX) :]))
    raise RuntimeError("the benchmark leg printed no result line:\n" + output[-3000:])
