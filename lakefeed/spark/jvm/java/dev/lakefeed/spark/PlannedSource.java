package dev.lakefeed.spark;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.streaming.Offset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.Option;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractPartialFunction;

/**
 * A Spark (V1) stream source whose offsets and batches Python plans.
 *
 * <p>Each batch is the DataFrame the planner built with Spark's own readers (Parquet, JSON...),
 * turned into a streaming plan here, so rows never pass through Python and the file scan keeps
 * Spark's column pruning and filter pushdown.
 */
public final class PlannedSource implements Source, SupportsTriggerAvailableNow {
  private final org.apache.spark.sql.classic.SparkSession session;
  private final StructType schema;
  private StreamPlanner planner; // null once stopped: the query's end releases its Python side
  private final String description;
  private final String checkpoint;
  private boolean offsetsAsked = false;

  PlannedSource(
      SparkSession session, StructType schema, StreamPlanner planner, String metadataPath) {
    this.session = (org.apache.spark.sql.classic.SparkSession) session;
    this.schema = schema;
    this.checkpoint = new Path(metadataPath).getParent().getParent().toString();
    this.planner = planner;
    this.description = planner.description();
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Option<Offset> getOffset() {
    throw new UnsupportedOperationException("latestOffset(start, limit) replaces getOffset()");
  }

  @Override
  public org.apache.spark.sql.connector.read.streaming.Offset initialOffset() {
    return new JsonOffset(planner.initialOffset());
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    String[] limit = planner.defaultReadLimit().split(":", 2);
    switch (limit[0]) {
      case "files":
        return ReadLimit.maxFiles(Integer.parseInt(limit[1]));
      case "bytes":
        return ReadLimit.maxBytes(Long.parseLong(limit[1]));
      case "rows":
        return ReadLimit.maxRows(Long.parseLong(limit[1]));
      default:
        return ReadLimit.allAvailable();
    }
  }

  @Override
  public org.apache.spark.sql.connector.read.streaming.Offset latestOffset(
      org.apache.spark.sql.connector.read.streaming.Offset start, ReadLimit limit) {
    offsetsAsked = true;
    String end = planner.latestOffset(JsonOffset.text(start), describe(limit));
    return end == null ? null : new JsonOffset(end);
  }

  private static String describe(ReadLimit limit) {
    if (limit instanceof ReadMaxFiles) {
      return "files:" + ((ReadMaxFiles) limit).maxFiles();
    }
    if (limit instanceof ReadMaxBytes) {
      return "bytes:" + ((ReadMaxBytes) limit).maxBytes();
    }
    if (limit instanceof ReadMaxRows) {
      return "rows:" + ((ReadMaxRows) limit).maxRows();
    }
    if (limit instanceof ReadAllAvailable) {
      return "all";
    }
    return "other:" + limit;
  }

  @Override
  public org.apache.spark.sql.connector.read.streaming.Offset reportLatestOffset() {
    String latest = planner.reportLatestOffset();
    return latest == null ? null : new JsonOffset(latest);
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    planner.prepareForTriggerAvailableNow();
  }

  @Override
  public Dataset<Row> getBatch(Option<Offset> start, Offset end) {
    if (!offsetsAsked && lastBatchCommitted()) {
      // A restart asks for the last committed batch once and discards it (for sources that
      // rebuild state that way); its files may be gone by now (cleanSource, VACUUM).
      return empty();
    }
    String from = start.isDefined() ? start.get().json() : null;
    org.apache.spark.sql.classic.Dataset<Row> batch =
        (org.apache.spark.sql.classic.Dataset<Row>) planner.batch(from, end.json());
    if (batch == null) {
      return empty();
    }
    return org.apache.spark.sql.classic.Dataset.ofRows(session, streaming(batch.logicalPlan()));
  }

  private Dataset<Row> empty() {
    return session
        .sqlContext()
        .internalCreateDataFrame(
            session.sparkContext().emptyRDD(ClassTag$.MODULE$.apply(InternalRow.class)),
            schema,
            true);
  }

  /** Whether the checkpoint's newest planned batch is in its commit log. */
  private boolean lastBatchCommitted() {
    try {
      Path offsets = new Path(checkpoint, "offsets");
      FileSystem fs = offsets.getFileSystem(session.sessionState().newHadoopConf());
      long latest = -1;
      for (FileStatus status : fs.listStatus(offsets)) {
        String name = status.getPath().getName();
        if (name.matches("\\d+")) {
          latest = Math.max(latest, Long.parseLong(name));
        }
      }
      return latest >= 0 && fs.exists(new Path(new Path(checkpoint, "commits"), "" + latest));
    } catch (java.io.FileNotFoundException e) {
      return false;
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Column name prefix of a local relation that is not the stream's data but a static side of
   * the batch (the Delta source's deleted rows, anti-joined): it stays a batch relation, so the
   * join is a stream–static one.
   */
  static final String STATIC_PREFIX = "__lakefeed_static";

  private static boolean isStatic(LogicalPlan node) {
    return node instanceof LocalRelation
        && node.output().nonEmpty()
        && node.output().head().name().startsWith(STATIC_PREFIX);
  }

  /** The same plan with its leaves marked as this stream's data (Spark asserts isStreaming). */
  private LogicalPlan streaming(LogicalPlan plan) {
    Option<org.apache.spark.sql.connector.read.streaming.SparkDataStream> self = Option.apply(this);
    return (LogicalPlan)
        plan.transformUp(
            new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
              @Override
              public boolean isDefinedAt(LogicalPlan node) {
                return node instanceof LogicalRelation
                    || (node instanceof LocalRelation && !isStatic(node));
              }

              @Override
              @SuppressWarnings("unchecked")
              public <A1 extends LogicalPlan, B1> B1 applyOrElse(
                  A1 node, Function1<A1, B1> fallback) {
                if (node instanceof LogicalRelation) {
                  LogicalRelation leaf = (LogicalRelation) node;
                  return (B1)
                      new LogicalRelation(
                          leaf.relation(), leaf.output(), leaf.catalogTable(), true, self);
                }
                if (node instanceof LocalRelation && !isStatic(node)) {
                  LocalRelation leaf = (LocalRelation) node;
                  return (B1) new LocalRelation(leaf.output(), leaf.data(), true, self);
                }
                return fallback.apply(node);
              }
            });
  }

  @Override
  public void commit(Offset end) {
    planner.commit(end.json());
  }

  @Override
  public void commit(org.apache.spark.sql.connector.read.streaming.Offset end) {
    planner.commit(end.json());
  }

  @Override
  public synchronized void stop() {
    if (planner != null) {
      try {
        planner.stop();
      } finally {
        planner = null;
        Planners.closed();
      }
    }
  }

  @Override
  public String toString() {
    return description;
  }
}
