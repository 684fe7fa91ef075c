-- https://docs.databricks.com/aws/en/dlt/load  (Auto Loader in SQL: read_files)
CREATE OR REFRESH STREAMING TABLE customers
AS SELECT * FROM STREAM read_files("/databricks-datasets/retail-org/customers/", format => "csv");
