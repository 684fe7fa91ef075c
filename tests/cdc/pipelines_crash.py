"""The crash test's pipeline: a Delta table of changes, one commit per micro-batch, applied as
SCD1 (whose result depends on each key's stored sequence: a lost or doubled state MERGE shows)."""

import lakefeed as lf


@lf.view
def changes():
    return lf.source("delta", lf.config("cdc.changes"), maxFilesPerTrigger="1")


lf.create_streaming_table("customers")
lf.create_auto_cdc_flow(
    target="customers",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
)
