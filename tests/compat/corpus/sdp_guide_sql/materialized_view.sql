-- https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
-- "Programming with SDP in SQL": "Creating Materialized View".
CREATE MATERIALIZED VIEW basic_mv
AS SELECT * FROM samples.nyctaxi.trips;
