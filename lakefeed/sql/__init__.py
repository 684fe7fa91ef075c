"""SQL text → the tables it reads and writes, by real parsers; one tokenizer for the rest.

Which parser, where, and why:

- **sqlglot** (Spark dialect; Databricks', its superset, for pipeline SQL with ``STREAM``) is
  the workhorse: :mod:`~lakefeed.sql.references`. lakefeed reads SQL in three places, and two
  of them have no JVM to ask: pipeline files are loaded and validated without Spark
  (``lakefeed validate``, the pipeline model, ``import dlt``/SDP registration) and must stay so;
  under Spark Connect the client holds no parser. The third, ``spark.sql`` on a classic
  session (:mod:`lakefeed.delta.sql.run`), uses the same reader, so a statement routes the
  same way in a pipeline file, in validation, on Connect and in a notebook.
- **Spark's own parser** (``sessionState().sqlParser().parsePlan``): :mod:`~lakefeed.sql.spark`,
  the authority on Spark's grammar, asked where a classic session is at hand about the
  statements sqlglot cannot read: Spark says whether they are Spark SQL at all (if not, Spark's
  own error reaches the user) and which tables they name (if one is a Delta table lakefeed must
  serve, lakefeed refuses with a coded error instead of letting Spark fail on a name it cannot
  resolve). It is not asked about every statement: its plan has positions only on JVM objects,
  a walk over Py4J costs milliseconds per node, and its answer would differ from the one
  validation gives without Spark.
- **A hand grammar** over :mod:`~lakefeed.sql.tokens`, the one tokenizer, for what neither
  parser knows: Delta's utility statements (VACUUM, OPTIMIZE, RESTORE, DESCRIBE HISTORY/DETAIL,
  GENERATE, CONVERT; :mod:`lakefeed.delta.sql.parse`) and the pipeline DDL wrappers (CREATE OR
  REFRESH STREAMING TABLE ... AS, CONSTRAINT ... EXPECT, AUTO CDC / APPLY CHANGES INTO;
  :mod:`lakefeed.pipeline.sql`, :mod:`lakefeed.cdc.sql`). The tokenizer also measures each
  reference a parser found (its span, its time travel clause) from the parser's position.

A cheap pre-check (:func:`lakefeed.delta.sql.parse.maybe_delta`, one regular expression) keeps
``spark.sql`` calls that cannot touch a Delta table (``SET``, ``SELECT 1``...) away from any
parser; see docs/sql.md for the measured costs.
"""
