-- Auto Loader in SQL (read_files), the form Databricks documents on "Load data in pipelines".
CREATE OR REFRESH STREAMING TABLE raw_invoices
AS SELECT * FROM STREAM read_files("/mnt/landing/invoices/", format => "csv");
