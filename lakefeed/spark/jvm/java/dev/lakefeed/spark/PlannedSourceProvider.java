package dev.lakefeed.spark;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.SchemaRelationProvider;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Map;

/**
 * {@code readStream.format("lakefeed_planned")}: a stream planned in Python, read by Spark; {@code
 * read.format(...)}: a batch read Python plans whenever a query reading it is planned.
 */
public final class PlannedSourceProvider
    implements StreamSourceProvider, SchemaRelationProvider, DataSourceRegister {
  static final String PLANNER_OPTION = "lakefeed.planner";
  static final String READER_OPTION = "lakefeed.planner.reader";
  static final String DESCRIPTION_OPTION = "lakefeed.planner.description";

  @Override
  public String shortName() {
    return "lakefeed_planned";
  }

  @Override
  public Tuple2<String, StructType> sourceSchema(
      SQLContext context, Option<StructType> schema, String provider, Map<String, String> options) {
    if (schema.isEmpty()) {
      throw new IllegalArgumentException("a planned stream needs its schema from the planner");
    }
    // Here, while the stream is defined: its query optimizes in a session cloned at start.
    PruneUnusedFileMetadata.install(context.sparkSession());
    return new Tuple2<>(shortName(), schema.get());
  }

  @Override
  public Source createSource(
      SQLContext context,
      String metadataPath,
      Option<StructType> schema,
      String provider,
      Map<String, String> options) {
    String id = options.get(PLANNER_OPTION).getOrElse(() -> "");
    String reader = options.get(READER_OPTION).getOrElse(() -> "");
    return new PlannedSource(
        context.sparkSession(), schema.get(), Planners.open(id, reader), metadataPath);
  }

  @Override
  public BaseRelation createRelation(
      SQLContext context, Map<String, String> options, StructType schema) {
    String id = options.get(PLANNER_OPTION).getOrElse(() -> "");
    String reader = options.get(READER_OPTION).getOrElse(() -> "");
    String description = options.get(DESCRIPTION_OPTION).getOrElse(() -> "PlannedRelation");
    return new PlannedRelation(context, schema, id, reader, description);
  }
}
