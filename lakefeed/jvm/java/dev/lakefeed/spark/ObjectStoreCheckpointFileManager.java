package dev.lakefeed.spark;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint files on S3 written in place, without a temporary file and a rename.
 *
 * <p>Spark writes each offset and commit log file as a temporary file renamed into place, so a
 * reader never sees half a file. On S3 an object appears only whole, when its upload completes,
 * and a rename is a copy plus a delete with S3A's listings and HEADs around it: most of the
 * checkpoint's requests per micro-batch (docs/benchmarks.md, "Deployment"). Here the file is
 * created at its final key; cancelling aborts the upload, so nothing appears. A file that must
 * not be overwritten is refused by S3A's create when it exists (Spark then reports a concurrent
 * writer, as with the rename). This is what Spark's own {@code
 * AbortableStreamBasedCheckpointFileManager} does, which lives in the {@code spark-hadoop-cloud}
 * jar the pyspark wheel lacks. Local and other paths keep Spark's rename-based writes.
 */
public class ObjectStoreCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
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
      return new InPlace(fs().create(path, overwriteIfPossible));
    } catch (IOException e) {
      throw Unchecked.<RuntimeException>raise(e);
    }
  }

  private static final class InPlace extends CancellableFSDataOutputStream {
    private final FSDataOutputStream out;

    InPlace(FSDataOutputStream out) {
      super(out);
      this.out = out;
    }

    @Override
    public void cancel() {
      out.abort(); // S3A's upload never completes: the object does not appear
    }
  }
}
