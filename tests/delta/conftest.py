"""The Delta tables other writers make, made once per test session (:mod:`tests.delta.foreign`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.delta.foreign import make_all


@pytest.fixture(scope="session")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, pa.Table]]:
    """The folder of the made tables and the rows each was made to hold; a test that writes
    copies its table first."""
    folder = tmp_path_factory.mktemp("foreign")
    return folder, make_all(folder)


@pytest.fixture(scope="session")
def foreign(made: tuple[Path, dict[str, pa.Table]]) -> Path:
    """The folder of the made tables, each under its name in ``foreign.TABLES``."""
    return made[0]
