package dev.lakefeed.spark;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The planner factories of the driver's Python sessions (one each), by the id a planned stream's
 * options carry, and how many planners running queries hold.
 *
 * <p>A planned DataFrame registers nothing: its plan carries the reader its queries open, so
 * any number of DataFrames, restarts and derived frames cost no entry here.
 */
public final class Planners {
  private static final ConcurrentHashMap<String, StreamPlannerFactory> FACTORIES =
      new ConcurrentHashMap<>();
  private static final AtomicInteger OPEN = new AtomicInteger();

  private Planners() {}

  public static void register(String id, StreamPlannerFactory factory) {
    FACTORIES.put(id, factory);
  }

  /** Registered factories (one per Python session that made a planned stream). */
  public static int size() {
    return FACTORIES.size();
  }

  /** Planners opened by queries and not yet stopped. */
  public static int open() {
    return OPEN.get();
  }

  static StreamPlanner open(String id, String reader) {
    StreamPlanner planner = factory(id).open(reader);
    OPEN.incrementAndGet();
    return planner;
  }

  /** A batch DataFrame planned now by the session's Python, from the opener a read carries. */
  static org.apache.spark.sql.Dataset<org.apache.spark.sql.Row> read(String id, String reader) {
    return factory(id).read(reader);
  }

  private static StreamPlannerFactory factory(String id) {
    StreamPlannerFactory factory = FACTORIES.get(id);
    if (factory == null) {
      throw new IllegalStateException(
          "no lakefeed planner " + id + " in this driver: a planned DataFrame runs only in"
              + " the Python process that defined it (define the DataFrame again to restart)");
    }
    return factory;
  }

  static void closed() {
    OPEN.decrementAndGet();
  }
}
