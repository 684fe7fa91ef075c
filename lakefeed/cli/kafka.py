"""``lakefeed kafka produce`` / ``lakefeed kafka topics``: feed and inspect Kafka topics.

``produce`` sends the built-in IoT generator's readings to a topic at a chosen rate (with a
progress bar), so the Kafka examples run end to end on a laptop.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lakefeed.connectors.generator.iot import GeneratorOptionError, IotConfig
from lakefeed.connectors.kafka.produce import KafkaSinkError
from lakefeed.core.config import KAFKA_BOOTSTRAP_ENV

servers_option = click.option(
    "--bootstrap-servers",
    "-b",
    envvar=KAFKA_BOOTSTRAP_ENV.key,
    default="127.0.0.1:9092",
    show_default=True,
    help="Kafka brokers (host:port,...). Env: LAKEFEED_KAFKA_BOOTSTRAP.",
)
config_option = click.option(
    "--config",
    "-X",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="librdkafka setting, repeatable (e.g. -X security.protocol=SASL_SSL).",
)


def _client(servers: str, settings: tuple[str, ...]) -> dict[str, str]:
    client = {"bootstrap.servers": servers}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="-X")
        client[key.strip()] = value
    return client


@click.group()
def kafka() -> None:
    """Feed and inspect Kafka topics."""


@kafka.command()
@click.argument("topic")
@servers_option
@config_option
@click.option("--rate", default=1000, show_default=True, help="Messages per second.")
@click.option("--total", type=int, default=None, help="Stop after this many (default: Ctrl-C).")
@click.option("--partitions", default=2, show_default=True, help="Partitions if created.")
@click.option("--devices", default=100, show_default=True, help="Distinct device ids (keys).")
@click.option("--seed", default=0, show_default=True, help="Generator seed (same seed, same data).")
@click.option("--malformed-rate", default=0.02, show_default=True, help="Share of bad payloads.")
@click.option("--duplicate-rate", default=0.02, show_default=True, help="Share of re-sent rows.")
def produce(
    topic: str,
    bootstrap_servers: str,
    settings: tuple[str, ...],
    rate: int,
    total: int | None,
    partitions: int,
    devices: int,
    seed: int,
    malformed_rate: float,
    duplicate_rate: float,
) -> None:
    """Send IoT readings (JSON values keyed by device id) to TOPIC at --rate messages/s."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.connectors.kafka.feed import Feeder, ensure_topic, wait_ready

    client = _client(bootstrap_servers, settings)
    try:
        config = IotConfig(
            rows_per_second=rate,
            total_rows=total,
            devices=devices,
            seed=seed,
            malformed_rate=malformed_rate,
            duplicate_rate=duplicate_rate,
        )
        wait_ready(client, timeout=5)
        if ensure_topic(client, topic, partitions, timeout=10):
            click.echo(f"created topic {topic} with {partitions} partition(s)", err=True)
        feeder = Feeder(client, topic, config)
    except (GeneratorOptionError, KafkaSinkError) as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    console = Console(stderr=True)
    with Progress(
        TextColumn(f"[bold]{topic}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("produce", total=total, rate="")

        def report(sent: int) -> None:
            elapsed = progress.tasks[task].elapsed or 0.0
            speed = f"{sent / elapsed:,.0f} msg/s" if elapsed > 0 else ""
            progress.update(task, completed=sent, rate=speed)

        try:
            sent = feeder.run(stop=stop, on_progress=report)
        except KafkaSinkError as exc:
            raise click.ClickException(str(exc)) from None
        report(sent)
    click.echo(f"{sent} messages acknowledged on {topic}")


@kafka.command()
@servers_option
@config_option
def topics(bootstrap_servers: str, settings: tuple[str, ...]) -> None:
    """List topics with their partitions and offsets (exact even on brokers that misreport)."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.connectors.kafka.client import BrokerView, KafkaSourceError
    from lakefeed.connectors.kafka.options import KafkaOptionError, parse_source_options

    options: dict[str, Any] = {
        f"kafka.{k}": v for k, v in _client(bootstrap_servers, settings).items()
    }
    options["subscribePattern"] = "[^_].*"
    try:
        view = BrokerView(parse_source_options(options, batch=True))
        try:
            watermarks = view.watermarks(view.partitions())
        finally:
            view.close()
    except (KafkaSourceError, KafkaOptionError) as exc:
        raise click.ClickException(str(exc)) from None
    table = Table("topic", "partition", "earliest", "latest", "messages")
    for (topic, partition), (low, high) in sorted(watermarks.items()):
        table.add_row(topic, str(partition), str(low), str(high), str(high - low))
    Console().print(table)


COMMANDS = [kafka]
