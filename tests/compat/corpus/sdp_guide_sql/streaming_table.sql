-- https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
-- "Programming with SDP in SQL": "Creating Streaming Table".
CREATE STREAMING TABLE basic_st
AS SELECT * FROM STREAM samples.nyctaxi.trips;
