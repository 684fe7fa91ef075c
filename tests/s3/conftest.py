"""One moto S3-API server per test session; tests get its AWS environment and fresh buckets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.s3 import MotoServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "moto" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.s3)


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture
def s3_env(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS variables of the test server, set in this process (delta-rs, pyarrow read them)."""
    env = moto.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
