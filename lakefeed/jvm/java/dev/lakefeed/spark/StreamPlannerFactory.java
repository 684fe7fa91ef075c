package dev.lakefeed.spark;

/** A Python session's planner maker: every query of a planned stream opens its own planner. */
public interface StreamPlannerFactory {
  /** A planner reading with {@code reader}, the opener the stream's plan carries (opaque here). */
  StreamPlanner open(String reader);
}
