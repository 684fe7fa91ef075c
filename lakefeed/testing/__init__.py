"""``lakefeed.testing``: unit-test a pipeline from pytest with fixed micro-batches.

Neither DLT nor Spark Declarative Pipelines lets a team test a pipeline locally; here a test
loads the pipeline unchanged, replaces each flow's outside source (``lf.source``,
``lf.read_kafka``, ``lf.read_files``, and in DLT/SDP files ``spark.readStream.format("kafka")``,
``format("cloudFiles")`` or ``readStream.table`` of an outside table) with rows it gives, steps
the streams batch by batch and asserts what landed::

    from lakefeed.testing import PipelineTest

    def test_silver_quarantines_bad_readings(spark, tmp_path):
        pipe = PipelineTest("pipelines/iot", tmp_path, spark=spark)
        pipe.feed("bronze_readings", [{"device_id": "d1", "value": '{"temperature": 21.5}'}])
        pipe.feed("bronze_readings", [{"device_id": "d2", "value": "not json"}])
        pipe.step()                      # each fed batch is one micro-batch, in order
        assert len(pipe.rows("silver_readings")) == 1
        assert pipe.expectations("silver_readings")["valid_json"]["failed"] == 1

Event time moves as in production: feed rows with later event times and ``step()``; the run
ends only when no batch is pending, so windows the watermark has closed are in the tables.
Fed rows take the source's own schema (a column left out is null), or a DataFrame is fed as is.
Everything stays under ``root``: the lakehouse, and each fed source as a small Delta table.
"""

from lakefeed.testing.pipeline_test import PipelineTest

__all__ = ["PipelineTest"]
