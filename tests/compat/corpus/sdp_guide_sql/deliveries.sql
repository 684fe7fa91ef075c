-- Datasets of the pipeline read by name from later ones (the guide's "Querying Tables Defined
-- in Your Pipeline" in SQL): a streaming table and a materialized view over inputs, then a join
-- and a daily count over them. Written for this suite with its own names.
CREATE STREAMING TABLE delivery_events AS SELECT * FROM STREAM deliveries_source;

CREATE MATERIALIZED VIEW depots AS SELECT * FROM depots_source;

CREATE MATERIALIZED VIEW deliveries_with_city
AS SELECT d.parcel_id, p.city, date(timestamp(int(d.delivered_at))) delivery_day
FROM delivery_events d
INNER JOIN depots p
ON d.depot_id = p.depot_id;

CREATE MATERIALIZED VIEW daily_deliveries_by_city
AS SELECT city, delivery_day, count(*) parcels
FROM deliveries_with_city
GROUP BY city, delivery_day;
