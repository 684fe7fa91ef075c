package dev.lakefeed.spark;

import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.collection.Iterator$;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A key's first row, the key then remembered for a TTL of processing time ({@code
 * lakefeed.drop_duplicates_within_ttl}, whose Python module documents the semantics).
 *
 * <p>One state row per key, as in Spark's own dedup: the key and the batch time that first saw
 * it. Spark's state TTL would add an index row per key ordered by expiry (twice the rows, the
 * writes and the changelog bytes, and four reads per new key: docs/benchmarks.md "Big state").
 * Here an expired key reads as absent at once (its time is checked on lookup) and its row is
 * removed by a sweep: keys are grouped into buckets (lakefeed.pipeline.dedup.BUCKETS) by Spark's
 * hash of the key columns, each bucket with one processing-time timer that reads the bucket and
 * removes what expired, once per sweep period; the buckets' timers are spread over the period, so
 * a batch sweeps about (batch interval / period) of the state instead of all of it.
 *
 * <p>In the JVM because each key costs state calls: from a Python worker each is a round trip to
 * the JVM's state server, here a call into RocksDB.
 */
public final class FirstPerKey extends StatefulProcessor<Integer, Row, Row> {
  /** The state variable's name, shown by {@code lakefeed state}: key -> first seen (ms). */
  public static final String SEEN = "seen";
  /** The bucket's registered sweep time (Spark warns on every re-registration of a timer). */
  public static final String SWEEP = "sweep";
  /** A bucket is swept every TTL / this, at most once per {@link #MIN_SWEEP_MS}. */
  static final long SWEEPS_PER_TTL = 4;
  static final long MIN_SWEEP_MS = 60_000;
  private static final String BUCKET = "__lakefeed_bucket";

  private final long ttlMs;
  private final int buckets;
  private final int[] keyPositions;
  private final StructType keySchema;
  private transient MapState<Row, Long> seen;
  private transient ValueState<Long> sweep;

  FirstPerKey(long ttlMs, int buckets, int[] keyPositions, StructType keySchema) {
    this.ttlMs = ttlMs;
    this.buckets = buckets;
    this.keyPositions = keyPositions;
    this.keySchema = keySchema;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    seen = getHandle().getMapState(SEEN, Encoders.row(keySchema), Encoders.LONG(), TTLConfig.NONE());
    sweep = getHandle().getValueState(SWEEP, Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Integer bucket, Iterator<Row> rows, TimerValues timers) {
    long now = timers.getCurrentProcessingTimeInMs();
    List<Row> first = new ArrayList<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      Row key = keyOf(row);
      Long seenAt = seen.getValue(key);
      if (seenAt == null || expired(seenAt, now)) {
        seen.updateValue(key, now);
        first.add(withoutBucket(row));
      }
    }
    if (!first.isEmpty()) {
      schedule(bucket, now);
    }
    return CollectionConverters.asScala(first.iterator());
  }

  /** The bucket's sweep: remove its expired keys; come back a period later while any remain. */
  @Override
  public Iterator<Row> handleExpiredTimer(
      Integer bucket, TimerValues timers, ExpiredTimerInfo expiredTimerInfo) {
    long now = timers.getCurrentProcessingTimeInMs();
    List<Row> gone = new ArrayList<>();
    boolean kept = false;
    Iterator<Tuple2<Row, Long>> entries = seen.iterator();
    while (entries.hasNext()) {
      Tuple2<Row, Long> entry = entries.next();
      if (expired(entry._2(), now)) {
        gone.add(entry._1());
      } else {
        kept = true;
      }
    }
    gone.forEach(seen::removeKey);
    if (kept) {
      schedule(bucket, now);
    }
    return Iterator$.MODULE$.empty();
  }

  /**
   * Register the bucket's next sweep unless it is registered already. One point read of the
   * bucket's {@link #SWEEP} value, not of the map (asking the map whether it holds keys opens a
   * RocksDB iterator per bucket and batch); registering a timer that exists is refused by Spark
   * with a warning per bucket and batch.
   */
  private void schedule(int bucket, long now) {
    long next = nextSweep(bucket, now);
    Long registered = sweep.get();
    if (registered == null || registered != next) {
      getHandle().registerTimer(next);
      sweep.update(next);
    }
  }

  /** Spark's TTL rule: expired once the batch time reaches the first sighting + TTL. */
  private boolean expired(long seenAt, long now) {
    return now >= seenAt + ttlMs;
  }

  /** The bucket's next sweep after {@code now}, at its own phase within the period. */
  long nextSweep(int bucket, long now) {
    long period = Math.max(ttlMs / SWEEPS_PER_TTL, MIN_SWEEP_MS);
    long phase = period * bucket / buckets;
    return now - Math.floorMod(now - phase, period) + period;
  }

  private Row keyOf(Row row) {
    Object[] values = new Object[keyPositions.length];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.get(keyPositions[i]);
    }
    return RowFactory.create(values);
  }

  private static Row withoutBucket(Row row) {
    Object[] values = new Object[row.length() - 1];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.get(i);
    }
    return RowFactory.create(values);
  }

  /** Spark prints the processor in the plan, which lakefeed's checkpoint guard compares. */
  @Override
  public String toString() {
    return "FirstPerKey(ttl=" + ttlMs + " ms, " + buckets + " buckets)";
  }

  /** A row's bucket (its last column); printed in the plan too, so a stable name. */
  private static final class BucketOf implements MapFunction<Row, Integer> {
    @Override
    public Integer call(Row row) {
      return row.getInt(row.length() - 1);
    }

    @Override
    public String toString() {
      return "BucketOf";
    }
  }

  /**
   * {@code df} without the rows whose {@code keys} columns were seen within the TTL, the keys
   * swept in {@code buckets} buckets.
   */
  public static Dataset<Row> dropDuplicatesWithinTtl(
      Dataset<Row> df, List<String> keys, long ttlMs, int buckets) {
    StructType schema = df.schema();
    int[] positions = new int[keys.size()];
    StructField[] fields = new StructField[keys.size()];
    Column[] columns = new Column[keys.size()];
    for (int i = 0; i < positions.length; i++) {
      positions[i] = schema.fieldIndex(keys.get(i));
      fields[i] = schema.fields()[positions[i]];
      columns[i] = df.col("`" + keys.get(i).replace("`", "``") + "`");
    }
    Dataset<Row> bucketed = df.withColumn(BUCKET, pmod(hash(columns), lit(buckets)));
    return bucketed
        .groupByKey(new BucketOf(), Encoders.INT())
        .transformWithState(
            new FirstPerKey(ttlMs, buckets, positions, new StructType(fields)),
            TimeMode.ProcessingTime(),
            OutputMode.Append(),
            Encoders.row(schema));
  }
}
