package dev.lakefeed.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.executor.CommitDeniedException;
import org.apache.spark.internal.io.FileCommitProtocol.TaskCommitMessage;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Spark's commit protocol, except for the writes of lakefeed's Delta sink: those write each
 * data file once, at its final place in the table, like delta-spark's {@code
 * DelayedCommitProtocol}.
 *
 * <p>Spark's own protocol writes into {@code _temporary} and renames at task and job commit; on
 * S3 every rename is a copy and a delete, so a Delta sink on S3 paid two copies per file, and a
 * third when lakefeed moved the file into the table. Nothing needs the renames here: a file
 * counts only once the Delta commit names it, so the driver only has to learn which files the
 * successful tasks wrote. A write marks itself with the options {@link #TOKEN} (a unique id the
 * driver collects the files under, {@link #take}) and {@link #PREFIX} (the files' name prefix:
 * a stream's carries its query and batch, so files of an attempt that never committed can be
 * found and removed). Every other write goes through Spark's protocol unchanged.
 *
 * <p>A failed task removes its files, a failed job those of the tasks that had committed; a task
 * that finishes after its job failed is denied its commit (Spark's output commit coordinator)
 * and removes its own. Not removable here: files of an executor killed mid-task. Delta readers
 * never see them (no commit names them); a stream's next run removes its batch's leftovers, a
 * full vacuum the others.
 */
public class DirectCommitProtocol extends SQLHadoopMapReduceCommitProtocol {
  public static final String TOKEN = "lakefeed.direct.token";
  public static final String PREFIX = "lakefeed.direct.prefix";
  private static final Map<String, List<String>> COMMITTED = new ConcurrentHashMap<>();

  private final String outputPath;
  private String token; // set on the driver by setupJob, shipped to the tasks with this object
  private String prefix;
  private transient List<String> written; // a task's files (on an executor)
  private transient List<String> committed; // the driver's: files of tasks that committed

  public DirectCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, dynamicPartitionOverwrite);
    this.outputPath = path;
  }

  /**
   * The files (relative to the output path) of the committed write marked {@code token}, as a
   * JSON array: one Py4J round trip for the driver's Python, whatever their number.
   */
  public static String take(String token) {
    List<String> files = COMMITTED.remove(token);
    return JsonStrings.write(files == null ? new ArrayList<>() : files);
  }

  @Override
  public void setupJob(JobContext job) {
    token = job.getConfiguration().get(TOKEN);
    if (token == null) {
      super.setupJob(job);
      return;
    }
    prefix = job.getConfiguration().get(PREFIX, "part-");
    committed = new ArrayList<>();
  }

  @Override
  public void setupTask(TaskAttemptContext task) {
    if (token == null) {
      super.setupTask(task);
    } else {
      written = new ArrayList<>();
    }
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext task, Option<String> dir, FileNameSpec spec) {
    if (token == null) {
      return super.newTaskTempFile(task, dir, spec);
    }
    int split = task.getTaskAttemptID().getTaskID().getId();
    String name = prefix + String.format("%05d-", split) + UUID.randomUUID() + spec.suffix();
    String relative = dir.isDefined() ? dir.get() + "/" + name : name;
    written.add(relative);
    return new Path(outputPath, relative).toString();
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext task, String dir, FileNameSpec spec) {
    if (token != null) {
      throw new UnsupportedOperationException("lakefeed's Delta writes have no custom locations");
    }
    return super.newTaskTempFileAbsPath(task, dir, spec);
  }

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext task) {
    if (token == null) {
      return super.commitTask(task);
    }
    TaskContext ctx = TaskContext.get();
    if (ctx != null && !mayCommit(ctx)) {
      delete(task.getConfiguration(), written);
      throw Unchecked.<RuntimeException>raise(
          new CommitDeniedException(
              "the write's stage has ended (its job failed) or another attempt committed",
              ctx.stageId(),
              ctx.partitionId(),
              ctx.attemptNumber()));
    }
    return new TaskCommitMessage(new ArrayList<>(written));
  }

  /**
   * Spark's output commit coordinator, as its own committers ask it: one attempt per partition
   * commits, and none once the stage has ended. A task still running when its job failed is
   * denied here and removes its files (the driver's {@link #abortJob} never hears of them).
   */
  private static boolean mayCommit(TaskContext ctx) {
    return SparkEnv.get()
        .outputCommitCoordinator()
        .canCommit(ctx.stageId(), ctx.stageAttemptNumber(), ctx.partitionId(), ctx.attemptNumber());
  }

  @Override
  public void abortTask(TaskAttemptContext task) {
    if (token == null) {
      super.abortTask(task);
    } else if (written != null) {
      delete(task.getConfiguration(), written); // a killed executor's files stay: see PREFIX
    }
  }

  @Override
  public void onTaskCommit(TaskCommitMessage message) {
    if (token != null && message.obj() instanceof List<?> files) {
      synchronized (this) {
        files.forEach(f -> committed.add((String) f));
      }
    }
  }

  @Override
  public void commitJob(JobContext job, Seq<TaskCommitMessage> messages) {
    if (token == null) {
      super.commitJob(job, messages);
      return;
    }
    List<String> files = new ArrayList<>();
    messages.foreach(
        m -> {
          if (m.obj() instanceof List<?> list) {
            list.forEach(f -> files.add((String) f));
          }
          return null;
        });
    COMMITTED.put(token, files);
  }

  @Override
  public void abortJob(JobContext job) {
    if (token == null) {
      super.abortJob(job);
    } else if (committed != null) {
      delete(job.getConfiguration(), committed); // tasks that committed before the job failed
    }
  }

  private void delete(Configuration conf, List<String> relative) {
    for (String file : relative) {
      Path path = new Path(outputPath, file);
      try {
        path.getFileSystem(conf).delete(path, false);
      } catch (IOException e) {
        // best effort: an unreferenced file is invisible to Delta readers; vacuum removes it
      }
    }
  }
}
