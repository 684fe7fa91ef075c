"""SQL text → the tables it reads and writes, by real parsers; one tokenizer for the rest.

Which parser, where, and why:

- **sqlglot** (Spark dialect; Databricks', its superset, for pipeline SQL with ``STREAM``) is the
  workhorse: :mod:`~lakefeed.sql.references`. lakefeed reads SQL in three places, and two of them
  have no JVM to ask: pipeline files are loaded and validated without Spark (``lakefeed validate``,
  the pipeline model, ``import dlt``/SDP registration) and must stay so; under Spark Connect the
  client holds no parser. The third, ``spark.sql`` on a classic session
  (:mod:`lakefeed.compat.delta_spark.sql.run`), uses the same reader, so a statement routes the same
  way in a pipeline file, in validation, on Connect and in a notebook.
- **Spark's own parser** (``sessionState().sqlParser().parsePlan``): :mod:`~lakefeed.sql.spark`,
  the authority on Spark's grammar where a classic session is at hand. Each statement
  ``spark.sql`` hands to lakefeed is checked against it: a Delta table its plan names that
  sqlglot did not place is refused with a coded error, never left for Spark to fail on; a
  statement sqlglot cannot read is Spark's unless its plan names a Delta table; text Spark
  rejects gets Spark's own error (Delta's utility statements aside: the hand grammar's). It
  does not place references itself: positions live on the JVM plan's objects (a Py4J walk
  costs milliseconds per node), and pipeline validation must answer the same without Spark.
- **A hand grammar** over :mod:`~lakefeed.sql.tokens`, the one tokenizer, read with one cursor
  (:mod:`~lakefeed.sql.grammar`), for what neither parser knows: a table's column list
  (:mod:`~lakefeed.sql.ddl`: declared schemas and Delta's CREATE TABLE), Delta's utility
  statements (VACUUM, OPTIMIZE, RESTORE, DESCRIBE HISTORY/DETAIL, GENERATE, CONVERT;
  :mod:`lakefeed.compat.delta_spark.sql.parse`) and the pipeline DDL wrappers
  (CREATE OR REFRESH STREAMING TABLE ... AS, CONSTRAINT ... EXPECT, AUTO CDC / APPLY CHANGES INTO;
  :mod:`lakefeed.pipeline.sql`, :mod:`lakefeed.cdc.sql`). The tokenizer also measures each
  reference a parser found (its span, its time travel clause) from the parser's position.

A cheap pre-check (:func:`lakefeed.compat.delta_spark.sql.parse.maybe_delta`, one regular
expression) keeps ``spark.sql`` calls that cannot touch a Delta table (``SET``, ``SELECT 1``...)
away from any parser; see docs/sql.md for the measured costs.
"""
