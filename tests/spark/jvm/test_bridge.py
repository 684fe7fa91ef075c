"""The Spark-free parts of planned streams: read limits across Py4J, when Spark may read files."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
)

from lakefeed.connectors.files.options import OptionError
from lakefeed.connectors.files.spark_read import ahead, choose, refusal
from lakefeed.spark.jvm.bridge import _limit, _text
from tests.connectors.files.test_core import _opts, _plan


@pytest.mark.parametrize(
    "limit", [ReadMaxFiles(7), ReadMaxBytes(1 << 30), ReadMaxRows(5), ReadAllAvailable()]
)
def test_read_limits_cross_as_text_and_back(limit) -> None:
    back = _limit(_text(limit))
    assert type(back) is type(limit) and vars(back) == vars(limit)


def test_an_unknown_limit_is_refused_not_read_as_all() -> None:
    with pytest.raises(ValueError, match="cannot honour"):
        _limit("other:minRows(5)")


def test_spark_reads_only_what_it_can_read_as_lakefeed_would(tmp_path: Path) -> None:
    opts = _opts(tmp_path)
    assert refusal(_plan(opts, "id BIGINT", tmp_path, "none", None, False)) is None
    assert "rescued-data" in str(refusal(_plan(opts, "id BIGINT", tmp_path, "none")))
    assert refusal(_plan(opts, "id BIGINT", tmp_path, "none", None)) is None  # Spark's _metadata
    evolving = _plan(opts, "id BIGINT", tmp_path, "addNewColumns", None, False)
    assert "addNewColumns" in str(refusal(evolving))
    skipping = _opts(tmp_path, ignoreCorruptFiles="true")
    assert "ignoreCorrupt" in str(
        refusal(_plan(skipping, "id BIGINT", tmp_path, "none", None, False))
    )


def test_spark_reads_by_default_unless_the_stream_needs_lakefeeds_reader(tmp_path: Path) -> None:
    opts = _opts(tmp_path)
    plain = _plan(opts, "id BIGINT", tmp_path, "none", None)
    assert ahead({}, spark_available=True) is None  # decided by the plan
    assert choose(plain, {}).reader == "spark" and "the default" in str(choose(plain, {}))
    forced = ahead({"LAKEFEED.reader": "Python"}, spark_available=True)
    assert forced is not None and forced.reader == "python"
    no_jar = ahead({}, spark_available=False)
    assert no_jar is not None and no_jar.reader == "python" and "Spark Connect" in no_jar.why
    no_s3a = ahead({}, spark_available=True, reaches_files=False)  # s3:// landing, no S3A
    assert no_s3a is not None and no_s3a.reader == "python" and "S3A" in no_s3a.why
    with pytest.raises(OptionError, match="no S3A connector"):
        ahead({"lakefeed.reader": "spark"}, spark_available=True, reaches_files=False)
    rescued = _plan(opts, "id BIGINT", tmp_path, "none")
    assert "rescued-data" in str(choose(rescued, {}))
    # An explicit spark is kept: the source refuses it with the reason (see source.py).
    assert choose(rescued, {"lakefeed.reader": "spark"}).reader == "spark"
