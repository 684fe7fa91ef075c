package dev.lakefeed.spark;

/** What a planned DataFrame registers: every query started from it opens its own planner. */
public interface StreamPlannerFactory {
  StreamPlanner open();
}
