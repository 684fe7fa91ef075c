-- A materialized view, a streaming table (STREAM keyword) and a temporary view, in the SQL forms
-- pyspark's Declarative Pipelines guide documents; written for this suite with its own names.
CREATE MATERIALIZED VIEW arrivals_mv AS SELECT * FROM harbour.logistics.arrivals;

CREATE STREAMING TABLE arrivals_st AS SELECT * FROM STREAM harbour.logistics.arrivals;

CREATE TEMPORARY VIEW arrivals_tv AS SELECT * FROM harbour.logistics.arrivals;
