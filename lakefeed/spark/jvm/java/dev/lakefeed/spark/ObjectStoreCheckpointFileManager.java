package dev.lakefeed.spark;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint files on S3 written in place, without a temporary file, a rename or S3A's
 * existence checks.
 *
 * <p>Spark writes each offset and commit log file as a temporary file renamed into place, so a
 * reader never sees half a file. On S3 an object appears only whole, when its upload completes,
 * and a rename is a copy plus a delete with S3A's listings and HEADs around it: most of the
 * checkpoint's requests per micro-batch (docs/benchmarks.md, "Deployment"). Here the file is
 * created at its final key; cancelling aborts the upload, so nothing appears. This is what
 * Spark's own {@code AbortableStreamBasedCheckpointFileManager} does, which lives in the {@code
 * spark-hadoop-cloud} jar the pyspark wheel lacks. Local and other paths keep Spark's
 * rename-based writes.
 *
 * <p>S3A's classic create probes the key before every upload (a HEAD and a LIST: is it a
 * folder, does the file exist), two round trips per checkpoint file. Hadoop 3.5's create
 * builder skips them ({@value #PERFORMANCE}). A file that must not be overwritten (Spark's guard
 * against a second query on the same checkpoint) is then refused by the store itself: the
 * upload is a conditional PUT ({@value #CONDITIONAL}, {@code If-None-Match: *}), which fails
 * when the key exists; the failure surfaces at {@code close()} as S3A's {@code
 * RemoteFileChangedException} (HTTP 412) and is raised as the {@link FileAlreadyExistsException}
 * Spark's metadata log reports as a concurrent writer. Unlike the probe, the check is atomic:
 * of two writers racing for one file, one fails. A store without conditional writes is declared
 * with {@code fs.s3a.create.conditional.enabled=false}; then S3A's probing create is used.
 */
public class ObjectStoreCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
  static final String PERFORMANCE = "fs.s3a.create.performance";
  static final String CONDITIONAL = "fs.option.create.conditional.overwrite";
  private static final String REFUSED = "org.apache.hadoop.fs.s3a.RemoteFileChangedException";

  private final boolean objectStore;

  public ObjectStoreCheckpointFileManager(Path path, Configuration hadoopConf) {
    super(path, hadoopConf);
    String scheme = fs().getScheme();
    objectStore = "s3a".equals(scheme) || "s3".equals(scheme);
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    if (!objectStore) {
      return super.createAtomic(path, overwriteIfPossible);
    }
    try {
      return new InPlace(create(path, overwriteIfPossible), path, !overwriteIfPossible);
    } catch (IOException e) {
      throw Unchecked.<RuntimeException>raise(e);
    }
  }

  private FSDataOutputStream create(Path path, boolean overwrite) throws IOException {
    boolean conditional = !overwrite && fs().hasPathCapability(path, CONDITIONAL);
    if (!overwrite && !conditional) {
      return fs().create(path, false); // S3A probes the key: refused now if it exists
    }
    FSDataOutputStreamBuilder<?, ?> builder = fs().createFile(path);
    builder.overwrite(overwrite).recursive().opt(PERFORMANCE, true);
    if (conditional) {
      builder.must(CONDITIONAL, true);
    }
    return builder.build();
  }

  private static final class InPlace extends CancellableFSDataOutputStream {
    private final FSDataOutputStream out;
    private final Path path;
    private final boolean mustBeNew;

    InPlace(FSDataOutputStream out, Path path, boolean mustBeNew) {
      super(out);
      this.out = out;
      this.path = path;
      this.mustBeNew = mustBeNew;
    }

    @Override
    public void close() throws IOException {
      try {
        super.close();
      } catch (IOException e) {
        if (mustBeNew && REFUSED.equals(e.getClass().getName())) {
          FileAlreadyExistsException exists =
              new FileAlreadyExistsException(path + " exists: the conditional create was refused");
          exists.initCause(e);
          throw exists;
        }
        throw e;
      }
    }

    @Override
    public void cancel() {
      out.abort(); // S3A's upload never completes: the object does not appear
    }
  }
}
