package dev.lakefeed.spark;

import org.apache.spark.sql.execution.streaming.Offset;

/** An offset Python wrote; Spark compares offsets by this text. */
public final class JsonOffset extends Offset {
  private final String json;

  public JsonOffset(String json) {
    this.json = json;
  }

  @Override
  public String json() {
    return json;
  }

  static String text(org.apache.spark.sql.connector.read.streaming.Offset offset) {
    return offset == null ? null : offset.json();
  }
}
