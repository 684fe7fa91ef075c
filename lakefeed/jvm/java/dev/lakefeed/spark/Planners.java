package dev.lakefeed.spark;

import java.util.concurrent.ConcurrentHashMap;

/** Planned streams the driver's Python process defined, by the id their options carry. */
public final class Planners {
  private static final ConcurrentHashMap<String, StreamPlannerFactory> PLANNERS =
      new ConcurrentHashMap<>();

  private Planners() {}

  public static void register(String id, StreamPlannerFactory planner) {
    PLANNERS.put(id, planner);
  }

  static StreamPlannerFactory get(String id) {
    StreamPlannerFactory planner = PLANNERS.get(id);
    if (planner == null) {
      throw new IllegalStateException(
          "no lakefeed stream planner " + id + " in this driver: a planned stream runs only in"
              + " the Python process that defined it (define the DataFrame again to restart)");
    }
    return planner;
  }
}
