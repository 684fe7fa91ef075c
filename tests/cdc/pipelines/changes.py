"""The change feed every AUTO CDC flow of this pipeline reads, and one lakefeed SCD1 target."""

import lakefeed as lf


@lf.view
def changes():
    # Replaced by the fed batches in tests (lakefeed.testing); the shape comes from the feed.
    return lf.source("iot", totalRows=1)


lf.create_streaming_table("customers")
lf.create_auto_cdc_flow(
    target="customers",
    source="changes",
    keys=["id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op"],
)
