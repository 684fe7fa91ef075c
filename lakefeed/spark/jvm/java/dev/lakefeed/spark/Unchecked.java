package dev.lakefeed.spark;

/**
 * Throws a checked exception through a method whose signature Spark fixed without it, where
 * Spark's caller catches it by type (a checkpoint file that exists, a denied task commit).
 */
final class Unchecked {
  private Unchecked() {}

  @SuppressWarnings("unchecked")
  static <E extends Throwable> E raise(Throwable e) throws E {
    throw (E) e;
  }
}
