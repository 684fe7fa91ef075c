-- DLT's SQL spellings of AUTO CDC: history (SCD2) and current rows (SCD1).
CREATE OR REFRESH STREAMING TABLE customers_history;

APPLY CHANGES INTO live.customers_history
FROM stream(changes)
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op)
STORED AS SCD TYPE 2;

CREATE OR REFRESH STREAMING TABLE customers_sql;

CREATE FLOW customers_sql_flow AS AUTO CDC INTO customers_sql
FROM STREAM(changes)
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op);
