-- Two append flows into one streaming table, the guide's CREATE FLOW ... AS INSERT INTO form.
CREATE STREAMING TABLE all_vessels;

CREATE FLOW from_pier_a AS INSERT INTO all_vessels SELECT * FROM STREAM(vessels_pier_a);

CREATE FLOW from_pier_b AS INSERT INTO all_vessels SELECT * FROM STREAM(vessels_pier_b);
