-- https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
-- "Programming with SDP in SQL": "Using Multiple Flows to Write to Single Target".
-- create a streaming table
CREATE STREAMING TABLE customers_us;

-- define the first append flow
CREATE FLOW append_customers_us_west
AS INSERT INTO customers_us
SELECT * FROM STREAM(customers_us_west);

-- define the second append flow
CREATE FLOW append_customers_us_east
AS INSERT INTO customers_us
SELECT * FROM STREAM(customers_us_east);
