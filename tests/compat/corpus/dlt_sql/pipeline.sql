-- Databricks' DLT (Lakeflow Declarative Pipelines) SQL reference, as its pages write it:
-- https://docs.databricks.com/aws/en/dlt-ref/dlt-sql-ref-create-streaming-table  (CONSTRAINT ... EXPECT)
-- https://docs.databricks.com/aws/en/dlt-ref/dlt-sql-ref-create-materialized-view
-- https://docs.databricks.com/aws/en/dlt-ref/dlt-sql-ref-create-flow  (INSERT INTO [ONCE])
-- https://docs.databricks.com/aws/en/dlt/cdc  (APPLY CHANGES INTO, SQL)
-- Inputs are tables of the workspace: orders_source, old_orders, users_source.

CREATE OR REFRESH STREAMING TABLE orders_bronze
COMMENT 'Raw orders'
AS SELECT * FROM STREAM orders_source;

CREATE OR REFRESH STREAMING TABLE orders_silver (
  CONSTRAINT valid_id EXPECT (order_id IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT valid_amount EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT has_customer EXPECT (customer IS NOT NULL)
)
COMMENT 'Valid orders'
TBLPROPERTIES ('quality' = 'silver')
AS SELECT order_id, customer, amount FROM STREAM(LIVE.orders_bronze);

CREATE OR REFRESH MATERIALIZED VIEW customer_totals
AS SELECT customer, sum(amount) AS total FROM LIVE.orders_silver GROUP BY customer;

CREATE OR REFRESH STREAMING TABLE all_orders;

CREATE FLOW live_orders
AS INSERT INTO all_orders BY NAME
SELECT order_id, amount FROM STREAM(LIVE.orders_silver);

CREATE FLOW backfill
AS INSERT INTO ONCE all_orders BY NAME
SELECT order_id, amount FROM old_orders;

CREATE TEMPORARY VIEW users
AS SELECT * FROM STREAM users_source;

CREATE OR REFRESH STREAMING TABLE target_scd2;

APPLY CHANGES INTO target_scd2
FROM stream(users)
KEYS (userId)
APPLY AS DELETE WHEN operation = "DELETE"
SEQUENCE BY sequenceNum
COLUMNS * EXCEPT (operation, sequenceNum)
STORED AS SCD TYPE 2;
