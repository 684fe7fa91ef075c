-- A materialized view, a streaming table and a temporary view in the SQL forms the SDP guide
-- documents (https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html), written for this test.
CREATE MATERIALIZED VIEW rides_mv AS SELECT * FROM samples.nyctaxi.trips;

CREATE STREAMING TABLE rides_st AS SELECT * FROM STREAM samples.nyctaxi.trips;

CREATE TEMPORARY VIEW rides_tv AS SELECT * FROM samples.nyctaxi.trips;
