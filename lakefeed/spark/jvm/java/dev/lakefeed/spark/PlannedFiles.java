package dev.lakefeed.spark;

import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * A planned stream's batch of files read by Spark's own reader, made in one call from Python.
 *
 * <p>The batch is planned inside {@code getBatch}: built in Python it cost a Py4J round trip
 * per file (the list of paths) and per projected column, on the driver, every micro-batch.
 */
public final class PlannedFiles {
  private PlannedFiles() {}

  /**
   * {@code reader.load(paths)}, then {@code selectExpr(projection)} unless {@code projection}
   * is null; both JSON arrays of strings.
   */
  public static Dataset<Row> read(DataFrameReader reader, String paths, String projection) {
    Dataset<Row> rows = reader.load(JsonStrings.parse(paths));
    return projection == null ? rows : rows.selectExpr(JsonStrings.parse(projection));
  }
}
