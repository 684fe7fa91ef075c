-- Two append flows into one streaming table (the guide's CREATE FLOW ... INSERT INTO form).
CREATE STREAMING TABLE all_customers;

CREATE FLOW from_west AS INSERT INTO all_customers SELECT * FROM STREAM(customers_us_west);

CREATE FLOW from_east AS INSERT INTO all_customers SELECT * FROM STREAM(customers_us_east);
