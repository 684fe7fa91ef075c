"""The one options helper every connector reads its options through."""

from __future__ import annotations

import pytest

from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.connectors.files.options import OptionError as FilesOptionError
from lakefeed.connectors.generator.iot import GeneratorOptionError, IotConfig
from lakefeed.connectors.kafka.options import KafkaOptionError, parse_source_options
from lakefeed.core.errors import OptionError, code_of, is_permanent
from lakefeed.core.options import Options, parse_bytes, parse_duration
from lakefeed.delta.options import (
    DeltaOptionError,
    partition_columns,
    time_travel_version,
    txn_option,
)
from lakefeed.spark.jvm.bridge import reader_choice


def test_names_in_any_case_values_never_shown() -> None:
    opts = Options({"maxFilesPerTrigger": "5", "Secret.Password": "pw-1", "unset": None})
    assert opts["maxfilespertrigger"] == opts.get("MAXFILESPERTRIGGER") == "5"
    assert "MaxFilesPerTrigger" in opts and "unset" not in opts and len(opts) == 2
    assert list(opts) == ["maxfilespertrigger", "secret.password"]  # as Spark hands them
    assert opts.given("secret.password") == "Secret.Password"
    assert "pw-1" not in repr(opts)
    # What Spark hands a data source is already lower-cased: camelCase lookups still find it.
    assert Options({"maxfilespertrigger": "7"}).positive_int("maxFilesPerTrigger") == 7


@pytest.mark.parametrize(
    ("getter", "raw", "value"),
    [
        ("flag", " TRUE ", True),
        ("integer", "-3", -3),
        ("positive_int", "12", 12),
        ("non_negative_int", "0", 0),
        ("number", "0.25", 0.25),
        ("byte_size", "10m", 10 << 20),
        ("duration", "1 minute", 60.0),
        ("names_list", " a, b ,,c", ["a", "b", "c"]),
    ],
)
def test_typed_getters_read_values(getter: str, raw: str, value: object) -> None:
    assert getattr(Options({"o": raw}), getter)("o") == value


@pytest.mark.parametrize(
    ("getter", "raw", "expected"),
    [
        ("flag", "yes", "option failOnDataLoss must be true or false, got 'yes'"),
        ("integer", "1.5", "option failOnDataLoss must be an integer, got '1.5'"),
        ("positive_int", "0", "option failOnDataLoss must be a positive integer, got '0'"),
        ("non_negative_int", "-1", "option failOnDataLoss must be an integer >= 0, got '-1'"),
        ("number", "inf", "option failOnDataLoss must be a finite number, got 'inf'"),
        ("byte_size", "ten", "must be a positive size in bytes like 1048576, 512k, 10m or 1g"),
        ("duration", "5 fortnights", "must be a duration like '5 seconds', '1 minute' or '100ms'"),
    ],
)
def test_misuse_names_the_option_the_value_and_what_it_takes(
    getter: str, raw: str, expected: str
) -> None:
    opts = Options({"failondataloss": raw})
    with pytest.raises(OptionError) as info:
        getattr(opts, getter)("failOnDataLoss")
    assert expected in str(info.value)
    assert code_of(info.value) == "OPTION" and is_permanent(info.value)
    assert getattr(Options({}), getter)("failOnDataLoss") in (None, False, [])


def test_sizes_and_durations_as_spark_writes_them() -> None:
    sizes = {"1048576": 1 << 20, "512k": 512 << 10, "10MB": 10 << 20, "1.5g": 3 << 29}
    assert {raw: parse_bytes(raw) for raw in sizes} == sizes
    assert parse_bytes("100b") == 100 and parse_bytes("0") is None and parse_bytes("-1k") is None
    durations = {"5 seconds": 5.0, "100ms": 0.1, "2h": 7200.0, "interval 1 day": 86400.0}
    assert {raw: parse_duration(raw) for raw in durations} == durations
    assert parse_duration("1 minute 30 seconds") == 90.0
    assert parse_duration("5") is None and parse_duration("soon") is None


def test_choices_in_any_case_list_what_is_allowed() -> None:
    opts = Options({"mode": "delete", "reader": "jvm", "strategy": "none", "format": "xml"})
    assert opts.choice("mode", ("OFF", "DELETE", "MOVE"), "OFF") == "DELETE"
    assert opts.choice("unset", ("a", "b"), "b") == "b" and opts.choice("unset", ("a",)) is None
    with pytest.raises(OptionError, match="option reader is 'spark' or 'python' .default 'spark'"):
        opts.choice("reader", ("spark", "python"), "spark")
    with pytest.raises(OptionError, match="format must be one of 'json', 'csv', 'parquet', got"):
        opts.choice("format", ("json", "csv", "parquet"))
    meanings = {"error": "fail", "latest": "start at the end"}
    with pytest.raises(OptionError, match=r"must be error \(fail\) or latest \(start at the end\)"):
        opts.choice("strategy", meanings, "error")


def test_every_connector_raises_its_own_coded_option_error() -> None:
    kafka = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "minPartitions": "x"}
    files = {"path": "/tmp/in", "cloudFiles.format": "json", "header": "maybe"}
    cases = [
        (KafkaOptionError, "KAFKA_OPTION", lambda: parse_source_options(kafka, batch=False)),
        (FilesOptionError, "FILES_OPTION", lambda: FileSourceOptions.parse(files)),
        (GeneratorOptionError, "GENERATOR_OPTION", lambda: IotConfig.from_options({"seed": "x"})),
        (DeltaOptionError, "DELTA_OPTION", lambda: txn_option({"txnappid": "a"})),
        (
            DeltaOptionError,
            "DELTA_OPTION",
            lambda: time_travel_version("/t", {"VersionAsOf": "-1"}),
        ),
        (OptionError, "OPTION", lambda: reader_choice({"Lakefeed.Reader": "jvm"}, "spark")),
    ]
    for error, code, parse in cases:
        with pytest.raises(error) as info:
            parse()
        assert isinstance(info.value, OptionError) and isinstance(info.value, ValueError)
        assert code_of(str(info.value)) == code and is_permanent(str(info.value))


def test_connectors_find_camel_case_options_spark_lower_cased() -> None:
    opts = FileSourceOptions.parse(
        {"path": "/tmp/in", "cloudfiles.format": "CSV", "cloudfiles.maxbytespertrigger": "1g"}
    )
    assert (opts.format, opts.max_bytes_per_trigger) == ("csv", 1 << 30)
    assert partition_columns({"partitionby": "a, b"}) == ["a", "b"]
    assert txn_option({"txnappid": "app", "TXNVERSION": "3"}) == ("app", 3)
    assert IotConfig.from_options({"rowspersecond": "5"}).rows_per_second == 5
    assert reader_choice({"LAKEFEED.READER": "Python"}, "spark") == "python"


def test_ignored_cloud_files_durations_must_still_be_durations() -> None:
    base = {"path": "/tmp/in", "cloudFiles.format": "json"}
    FileSourceOptions.parse({**base, "cloudfiles.backfillinterval": "1 day"})
    with pytest.raises(FilesOptionError, match="cleanSource.retentionDuration must be a duration"):
        FileSourceOptions.parse({**base, "cloudFiles.cleanSource.retentionDuration": "30 dayz"})
