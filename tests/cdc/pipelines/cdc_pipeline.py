"""A change feed applied three ways: SCD1, SCD1 ignoring null updates, SCD2 (history)."""

import lakefeed as lf


@lf.view
def changes():
    # Replaced by the fed batches in tests (lakefeed.testing); the shape comes from the feed.
    return lf.source("rate")


lf.create_streaming_table("customers")
lf.create_auto_cdc_flow(
    target="customers",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
)

lf.create_streaming_table("customers_patched")
lf.apply_changes(
    target="customers_patched",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
    ignore_null_updates=True,
)

lf.create_streaming_table("customers_history")
lf.create_auto_cdc_flow(
    target="customers_history",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
    stored_as_scd_type="2",
)
