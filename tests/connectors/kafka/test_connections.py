"""``lakefeed validate --check-connections`` against a live broker: each flow's brokers answer,
with the flow's own topic; a second flow whose brokers are down fails the command."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lakefeed.cli.main import cli
from tests.connectors.kafka.broker import Tansu
from tests.support.net import free_port


def test_check_connections_against_a_live_broker(spark, broker: Tansu, tmp_path: Path) -> None:
    del spark  # the command reuses the running session
    topic = broker.create_topic(partitions=2)
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "k.py").write_text(
        "import lakefeed as lf\n\n"
        "@lf.table\ndef events():\n"
        f"    return lf.read_kafka({topic!r}, bootstrap_servers={broker.bootstrap!r})\n"
    )
    args = ["validate", str(folder), "--lakehouse", str(tmp_path / "lh"), "--check-connections"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    flat = " ".join(done.output.split())
    assert "ok" in flat and "2 partitions" in flat and topic in flat

    (folder / "down.py").write_text(
        "import lakefeed as lf\n\n"
        "@lf.table\ndef down():\n"
        f"    return lf.read_kafka({topic!r}, bootstrap_servers='127.0.0.1:{free_port()}',"
        " **{'fetchOffset.timeoutMs': 300})\n"
    )
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    flat = " ".join(done.output.split())
    assert "FAILED" in flat and "flow 'down'" in flat and "Traceback" not in done.output
