-- The same SCD1 target in SQL: the backfill as AUTO CDC ONCE INTO, reading the batch dataset.
CREATE OR REFRESH STREAMING TABLE accounts_sql;

CREATE FLOW accounts_sql_live AS AUTO CDC INTO accounts_sql
FROM STREAM(changes)
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op);

CREATE FLOW accounts_sql_backfill AS AUTO CDC ONCE INTO accounts_sql
FROM history
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op);
