"""The broker fixture: one tansu per test session on a free 127.0.0.1 port, stopped by PID.

Each test creates its own topic (``broker.create_topic()``), so tests never see each other's
messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.broker import Tansu

BROKER_FIXTURES = {"broker"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    log = Path(tmp_path_factory.mktemp("tansu")) / "tansu.log"
    tansu = Tansu(log).start()
    yield tansu
    tansu.stop()
