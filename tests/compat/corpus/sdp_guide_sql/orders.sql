-- Pipeline tables queried by name from later ones (the guide's "Querying Tables Defined in
-- Your Pipeline"), written for this test.
CREATE STREAMING TABLE order_events AS SELECT * FROM STREAM orders_source;

CREATE MATERIALIZED VIEW customer_states AS SELECT * FROM customers_source;

CREATE MATERIALIZED VIEW orders_with_state AS
SELECT o.order_number, c.state, date(timestamp(int(o.order_datetime))) AS order_date
FROM order_events AS o JOIN customer_states AS c ON o.customer_id = c.customer_id;

CREATE MATERIALIZED VIEW orders_per_state_and_day AS
SELECT state, order_date, count(*) AS order_count
FROM orders_with_state
GROUP BY state, order_date;
