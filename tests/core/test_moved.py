"""Module paths from before the package map still import (with a DeprecationWarning), and
nothing in the repository uses them any more."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakefeed.moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
# Strings that only look like an old module path: Spark conf keys and logger names.
NOT_MODULES = ('"lakefeed.lakehouse"', "`lakefeed.lakehouse`")


@pytest.mark.slow  # a fresh interpreter imports every old path
def test_an_old_path_is_the_module_at_its_new_path_with_a_warning():
    code = (
        "import warnings, importlib; warnings.simplefilter('error', DeprecationWarning)\n"
        "import lakefeed\n"
        "try:\n    import lakefeed.errors\nexcept DeprecationWarning as w:\n    print(w)\n"
        "warnings.simplefilter('ignore')\n"
        "from lakefeed.errors import LakefeedError\n"
        "from lakefeed.core.errors import LakefeedError as New\n"
        "from lakefeed.delta import DeltaTable\n"
        "from delta.tables import DeltaTable as Surface\n"
        "print(LakefeedError is New, DeltaTable is Surface)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "lakefeed.errors moved to lakefeed.core.errors; import it from there"
    assert out[1] == "True True"


@pytest.mark.parametrize("new", sorted(set(MOVED.values())))
def test_every_new_path_exists(new):
    assert importlib.util.find_spec(new) is not None


def test_nothing_in_the_repository_uses_an_old_path():
    listed = subprocess.run(
        ["git", "ls-files", "lakefeed", "tests", "bench", "delta", "docs", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = "|".join(re.escape(old) for old in sorted(MOVED, key=len, reverse=True))
    old_path = re.compile(rf"(?<![\w.])({names})(?![\w])")
    parents = {old.rpartition(".")[0] for old in MOVED}
    from_import = re.compile(r"from (\S+) import ([\w, ]+)")
    found = []
    for name in listed:
        itself = name.endswith(("lakefeed/moved.py", "tests/core/test_moved.py"))
        if itself or not name.endswith((".py", ".md")):
            continue
        for number, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            text = line
            for literal in NOT_MODULES:
                text = text.replace(literal, "")
            hits = [m.group(1) for m in old_path.finditer(text)]
            for parent, imported in from_import.findall(text):
                if parent in parents:
                    hits += [f"{parent}.{n.strip()}" for n in imported.split(",")]
            found += [f"{name}:{number}: {hit}" for hit in hits if hit in MOVED]
    assert not found
