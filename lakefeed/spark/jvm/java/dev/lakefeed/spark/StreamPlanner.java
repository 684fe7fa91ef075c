package dev.lakefeed.spark;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * The Python half of a planned stream, called back over Py4J in the driver process.
 *
 * <p>Offsets cross as JSON text; a limit as "all", "files:N", "bytes:N" or "rows:N". Python
 * keeps every decision (which files make up a batch, when to fail); the JVM only reads them.
 */
public interface StreamPlanner {
  /** What the query's progress calls this source, e.g. {@code DeltaSource[/data/events]}. */
  String description();

  String initialOffset();

  String defaultReadLimit();

  String latestOffset(String start, String limit);

  String reportLatestOffset();

  void prepareForTriggerAvailableNow();

  /** A batch DataFrame of the rows in (start, end]; start is null for the first batch. */
  Dataset<Row> batch(String start, String end);

  void commit(String end);

  void stop();
}
