"""The decorators keep a flow function's type, bare (``@lf.table``) and called (``@lf.table(...)``),
and a type checker catches a wrong argument. Checked with mypy itself on a small pipeline file."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

# Third-party packages are skipped: the check is about lakefeed's signatures, and fast.
CONFIG = """
[mypy]
ignore_missing_imports = True
follow_imports = silent
[mypy-pyspark.*,pyarrow.*,deltalake.*,pandas.*,numpy.*,confluent_kafka.*]
follow_imports = skip
"""

FLOWS = """
import lakefeed as lf

@lf.table
def bare() -> int:
    return 1

@lf.table(comment="raw", table_properties={"quality": "bronze"})
def called() -> int:
    return 1

@lf.materialized_view
def summary() -> str:
    return ""

@lf.view(name="named")
def named() -> bytes:
    return b""

reveal_type(bare)
reveal_type(called)
reveal_type(summary)
reveal_type(named)
lf.table(comment=3)
"""


@pytest.mark.slow  # mypy itself
def test_decorators_keep_the_flow_function_type(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(CONFIG)
    (tmp_path / "flows.py").write_text(FLOWS)
    out, err, _ = api.run(
        [
            "--no-incremental",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            str(tmp_path / "flows.py"),
        ]
    )
    revealed = [
        line.split("Revealed type is ")[1] for line in out.splitlines() if "Revealed" in line
    ]
    assert revealed == [
        '"def () -> int"',
        '"def () -> int"',
        '"def () -> str"',
        '"def () -> bytes"',
    ]
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "flows.py:24" in errors[0] and "table" in errors[0], out + err
