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
    StreamPlannerFactory factory = FACTORIES.get(id);
    if (factory == null) {
      throw new IllegalStateException(
          "no lakefeed stream planner " + id + " in this driver: a planned stream runs only in"
              + " the Python process that defined it (define the DataFrame again to restart)");
    }
    StreamPlanner planner = factory.open(reader);
    OPEN.incrementAndGet();
    return planner;
  }

  static void closed() {
    OPEN.decrementAndGet();
  }
}
