package dev.lakefeed.spark;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.collection.Iterator$;

/**
 * A key's first row, the key then remembered for a TTL of processing time ({@code
 * lakefeed.drop_duplicates_within_ttl}, whose Python module documents the semantics).
 *
 * <p>In the JVM because each key costs state calls: from a Python worker each is a round trip
 * to the JVM's state server, here a call into RocksDB. Spark's TTL keeps an index by expiry, so
 * a batch's eviction reads only the keys that expire.
 */
public final class FirstPerKey extends StatefulProcessor<Row, Row, Row> {
  /** The state variable's name, shown by {@code lakefeed state}. */
  public static final String SEEN = "seen";

  private final long ttlMs;
  private transient ValueState<Boolean> seen;

  public FirstPerKey(long ttlMs) {
    this.ttlMs = ttlMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    TTLConfig ttl = TTLConfig.apply(Duration.ofMillis(ttlMs));
    seen = getHandle().getValueState(SEEN, Encoders.BOOLEAN(), ttl);
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    if (seen.exists()) { // an expired key reads as absent, even before its cleanup
      return Iterator$.MODULE$.empty();
    }
    seen.update(Boolean.TRUE);
    return Iterator$.MODULE$.single(rows.next());
  }

  /** Spark prints the processor in the plan, which lakefeed's checkpoint guard compares. */
  @Override
  public String toString() {
    return "FirstPerKey(ttl=" + ttlMs + " ms)";
  }

  /** A row's key columns; printed in the plan too, so a stable name rather than a lambda's. */
  private static final class KeyOf implements MapFunction<Row, Row> {
    private final int[] positions;

    KeyOf(int[] positions) {
      this.positions = positions;
    }

    @Override
    public Row call(Row row) {
      Object[] values = new Object[positions.length];
      for (int i = 0; i < positions.length; i++) {
        values[i] = row.get(positions[i]);
      }
      return RowFactory.create(values);
    }

    @Override
    public String toString() {
      return "KeyOf" + Arrays.toString(positions);
    }
  }

  /** {@code df} grouped on the {@code keys} columns, each key's first row within the TTL. */
  public static Dataset<Row> dropDuplicatesWithinTtl(
      Dataset<Row> df, List<String> keys, long ttlMs) {
    StructType schema = df.schema();
    int[] positions = new int[keys.size()];
    StructField[] fields = new StructField[keys.size()];
    for (int i = 0; i < positions.length; i++) {
      positions[i] = schema.fieldIndex(keys.get(i));
      fields[i] = schema.fields()[positions[i]];
    }
    return df.groupByKey(new KeyOf(positions), Encoders.row(new StructType(fields)))
        .transformWithState(
            new FirstPerKey(ttlMs),
            TimeMode.ProcessingTime(),
            OutputMode.Append(),
            Encoders.row(schema));
  }
}
