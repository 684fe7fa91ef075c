package dev.lakefeed.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.PrunedFilteredScan;
import org.apache.spark.sql.types.StructType;

/**
 * A batch read planned in Python each time a query is planned, read by Spark's own readers.
 *
 * <p>Spark calls {@link #buildScan} when it plans a query, and plans a streaming query again
 * for every micro-batch: so the static side of a stream–static join asks Python for the table
 * as it is then (its latest version), as Delta's own static reads do, while the rows never
 * leave the JVM. Filters are handed on to the inner DataFrame (its Parquet scans prune with
 * them) and evaluated again by Spark, which keeps them all.
 */
public final class PlannedRelation extends BaseRelation implements PrunedFilteredScan {
  private final SQLContext context;
  private final StructType schema;
  private final String planner;
  private final String reader;
  private final String description;

  PlannedRelation(
      SQLContext context, StructType schema, String planner, String reader, String description) {
    this.context = context;
    this.schema = schema;
    this.planner = planner;
    this.reader = reader;
    this.description = description;
  }

  @Override
  public SQLContext sqlContext() {
    return context;
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public boolean needConversion() {
    return false; // buildScan hands Spark's internal rows, as its own file sources do
  }

  @Override
  @SuppressWarnings("unchecked")
  public RDD<Row> buildScan(String[] requiredColumns, Filter[] filters) {
    Dataset<Row> frame = Planners.read(planner, reader);
    for (Filter filter : filters) {
      Column condition = column(filter);
      if (condition != null) {
        frame = frame.where(condition);
      }
    }
    List<Column> columns = new ArrayList<>();
    for (String name : requiredColumns) {
      columns.add(frame.col("`" + name.replace("`", "``") + "`"));
    }
    Dataset<Row> pruned = frame.select(columns.toArray(new Column[0]));
    return (RDD<Row>) (RDD<?>) ((org.apache.spark.sql.classic.Dataset<Row>) pruned)
        .queryExecution()
        .toRdd();
  }

  /** A pushed filter as a Column, or null for a kind not handed on (Spark applies it). */
  static Column column(Filter filter) {
    if (filter instanceof EqualTo f) {
      return col(f.attribute()).equalTo(functions.lit(f.value()));
    } else if (filter instanceof EqualNullSafe f) {
      return col(f.attribute()).eqNullSafe(functions.lit(f.value()));
    } else if (filter instanceof GreaterThan f) {
      return col(f.attribute()).gt(functions.lit(f.value()));
    } else if (filter instanceof GreaterThanOrEqual f) {
      return col(f.attribute()).geq(functions.lit(f.value()));
    } else if (filter instanceof LessThan f) {
      return col(f.attribute()).lt(functions.lit(f.value()));
    } else if (filter instanceof LessThanOrEqual f) {
      return col(f.attribute()).leq(functions.lit(f.value()));
    } else if (filter instanceof In f) {
      return col(f.attribute()).isin(f.values());
    } else if (filter instanceof IsNull f) {
      return col(f.attribute()).isNull();
    } else if (filter instanceof IsNotNull f) {
      return col(f.attribute()).isNotNull();
    } else if (filter instanceof And f) {
      Column left = column(f.left());
      Column right = column(f.right());
      return left == null ? right : right == null ? left : left.and(right);
    }
    return null;
  }

  private static Column col(String attribute) {
    return functions.col("`" + attribute.replace("`", "``") + "`");
  }

  @Override
  public String toString() {
    return description; // what the plan's scan shows, e.g. DeltaTable[/data/devices]
  }
}
