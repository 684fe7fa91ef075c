package dev.lakefeed.spark;

/**
 * A Python session's planner maker: every query of a planned stream opens its own planner; a
 * planned batch read asks for its DataFrame each time a query reading it is planned.
 */
public interface StreamPlannerFactory {
  /** A planner reading with {@code reader}, the opener the stream's plan carries (opaque here). */
  StreamPlanner open(String reader);

  /** The rows a planned batch read with {@code reader} (its opener) holds now. */
  org.apache.spark.sql.Dataset<org.apache.spark.sql.Row> read(String reader);
}
