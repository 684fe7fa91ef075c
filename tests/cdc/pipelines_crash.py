"""The crash test's pipeline: a Delta table of changes, one commit per micro-batch, applied as
SCD1 and SCD2."""

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

lf.create_streaming_table("customers_history")
lf.create_auto_cdc_flow(
    target="customers_history",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
    stored_as_scd_type=2,
)
