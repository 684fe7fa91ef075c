package dev.lakefeed.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.ExperimentalMethods;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.FileSourceMetadataAttribute$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import scala.Function1;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Drops Spark's hidden file-metadata column from a planned stream's file scan when nothing above
 * the scan uses it.
 *
 * <p>A planned cloudFiles batch builds lakefeed's visible {@code _metadata} from Spark's hidden
 * one, so the batch's {@link LogicalRelation} has the hidden column in its output. Spark adds
 * that column to a relation only when a query references it ({@code AddMetadataColumns}) and
 * never prunes a leaf's output, and {@code FileSourceStrategy} fills the metadata of every row of
 * a relation whose output has it. So a flow that never selects {@code _metadata} paid for it
 * all the same (+5–28% JVM CPU on YSB's read). Once column pruning has removed the unused
 * {@code _metadata} struct above the scan, this rule removes the hidden column from the
 * relation's output: the scan then reads what Spark's own file stream would. A query that uses
 * {@code _metadata} keeps it (only the fields it reads, by Spark's nested schema pruning).
 *
 * <p>Only the leaves of {@link PlannedSource} are touched; a {@code Project} or a {@code Filter}
 * above them is where column pruning leaves the references to check.
 */
public final class PruneUnusedFileMetadata extends Rule<LogicalPlan> {
  private PruneUnusedFileMetadata() {}

  /**
   * Adds the rule to the session's optimizer once. A streaming query optimizes its batches in
   * a clone of the session made when it starts, so the rule is installed when the stream is
   * defined.
   */
  static void install(org.apache.spark.sql.SparkSession session) {
    ExperimentalMethods methods = session.experimental();
    synchronized (methods) {
      List<Rule<LogicalPlan>> rules =
          new ArrayList<>(CollectionConverters.asJava(methods.extraOptimizations()));
      if (rules.stream().noneMatch(rule -> rule instanceof PruneUnusedFileMetadata)) {
        rules.add(new PruneUnusedFileMetadata());
        methods.extraOptimizations_$eq(CollectionConverters.asScala(rules).toList());
      }
    }
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return (LogicalPlan)
        plan.transformDown(
            new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
              @Override
              public boolean isDefinedAt(LogicalPlan node) {
                return node instanceof Project;
              }

              @Override
              @SuppressWarnings("unchecked")
              public <A1 extends LogicalPlan, B1> B1 applyOrElse(
                  A1 node, Function1<A1, B1> fallback) {
                return node instanceof Project ? (B1) pruned(node) : fallback.apply(node);
              }
            });
  }

  /** {@code top} with its planned leaf's unused metadata column dropped, or {@code top}. */
  private static LogicalPlan pruned(LogicalPlan top) {
    LogicalRelation leaf = plannedLeaf(top);
    if (leaf == null) {
      return top;
    }
    List<AttributeReference> kept = new ArrayList<>();
    for (AttributeReference column : CollectionConverters.asJava(leaf.output())) {
      if (!FileSourceMetadataAttribute$.MODULE$.unapply(column).isDefined()
          || referenced(top, column)) {
        kept.add(column);
      }
    }
    if (kept.size() == leaf.output().size()) {
      return top;
    }
    Seq<AttributeReference> output = CollectionConverters.asScala(kept).toList();
    return replaced(
        top,
        new LogicalRelation(
            leaf.relation(), output, leaf.catalogTable(), leaf.isStreaming(), leaf.stream()));
  }

  /** The planned stream's relation right under {@code top} and its filters, or null. */
  private static LogicalRelation plannedLeaf(LogicalPlan top) {
    LogicalPlan node = ((Project) top).child();
    while (node instanceof Filter filter) {
      node = filter.child();
    }
    if (node instanceof LogicalRelation leaf
        && leaf.stream().isDefined()
        && leaf.stream().get() instanceof PlannedSource) {
      return leaf;
    }
    return null;
  }

  /** Whether {@code top} or a filter between it and the relation uses {@code column}. */
  private static boolean referenced(LogicalPlan top, AttributeReference column) {
    for (LogicalPlan node = top; !(node instanceof LogicalRelation); node = node.children().head()) {
      if (node.references().contains(column)) {
        return true;
      }
    }
    return false;
  }

  private static LogicalPlan replaced(LogicalPlan node, LogicalRelation leaf) {
    if (node instanceof LogicalRelation) {
      return leaf;
    }
    LogicalPlan child = replaced(node.children().head(), leaf);
    return (LogicalPlan) node.withNewChildren(CollectionConverters.asScala(List.of(child)).toList());
  }
}
