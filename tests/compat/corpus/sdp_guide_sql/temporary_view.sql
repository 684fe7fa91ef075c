-- https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
-- "Programming with SDP in SQL": "Creating Temporary View".
CREATE TEMPORARY VIEW basic_tv
AS SELECT * FROM samples.nyctaxi.trips;
