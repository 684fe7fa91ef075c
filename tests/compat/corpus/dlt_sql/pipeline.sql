-- DLT's SQL statements in the forms Databricks' reference pages document, written for this suite
-- with its own data: CREATE OR REFRESH STREAMING TABLE with CONSTRAINT ... EXPECT, CREATE OR
-- REFRESH MATERIALIZED VIEW, CREATE FLOW ... INSERT INTO [ONCE], and AUTO CDC in both spellings
-- (APPLY CHANGES INTO and CREATE FLOW ... AS AUTO CDC INTO).
-- The inputs are tables of the workspace: orders_source, archived_orders, account_changes_source.

CREATE OR REFRESH STREAMING TABLE orders_bronze
COMMENT 'Orders as they land'
AS SELECT * FROM STREAM orders_source;

CREATE OR REFRESH STREAMING TABLE orders_silver (
  CONSTRAINT order_has_id EXPECT (order_id IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT amount_positive EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT customer_named EXPECT (customer IS NOT NULL)
)
COMMENT 'Orders that pass the rules'
TBLPROPERTIES ('layer' = 'silver')
AS SELECT order_id, customer, amount FROM STREAM(LIVE.orders_bronze);

CREATE OR REFRESH MATERIALIZED VIEW customer_totals
AS SELECT customer, sum(amount) AS total FROM LIVE.orders_silver GROUP BY customer;

CREATE OR REFRESH STREAMING TABLE all_orders;

CREATE FLOW current_orders
AS INSERT INTO all_orders BY NAME
SELECT order_id, amount FROM STREAM(LIVE.orders_silver);

CREATE FLOW archive_once
AS INSERT INTO ONCE all_orders BY NAME
SELECT order_id, amount FROM archived_orders;

CREATE TEMPORARY VIEW account_feed
AS SELECT * FROM STREAM account_changes_source;

CREATE OR REFRESH STREAMING TABLE accounts_history;

APPLY CHANGES INTO accounts_history
FROM stream(account_feed)
KEYS (account_id)
APPLY AS DELETE WHEN op = "DELETE"
SEQUENCE BY change_seq
COLUMNS * EXCEPT (op, change_seq)
STORED AS SCD TYPE 2;

CREATE OR REFRESH STREAMING TABLE accounts_current;

CREATE FLOW accounts_current_changes
AS AUTO CDC INTO accounts_current
FROM STREAM(account_feed)
KEYS (account_id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY change_seq
COLUMNS * EXCEPT (op, change_seq)
STORED AS SCD TYPE 1;
