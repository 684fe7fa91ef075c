"""The row order OPTIMIZE gives a liquid-clustered table's files, Spark-free: a Z-order curve
over the clustering columns.

delta-spark clusters a table's files along a Hilbert curve over its clustering columns, range
partitioned across the files it clusters. lakefeed orders the rows of each file it rewrites
along a Z-order (Morton) curve instead: each column's values are replaced by their dense rank
(nulls last), scaled to an equal share of a 64-bit key, and the keys' bits are interleaved, so
rows close in every clustering column sit close together and each file's statistics bound a
small box of the clustering space. Both curves keep neighbours together; Hilbert's has no
jumps between quadrants, Z-order's is cheaper to compute. The curve runs over one rewritten
file's rows, not over the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY_BITS = 64
"""The width of the interleaved key: each of ``n`` columns gets ``64 // n`` bits of rank."""


def ordered(rows: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``rows`` in Z-order of ``columns`` (dotted paths into structs, as clustering columns are
    named); ties keep their order."""
    if not columns or rows.num_rows < 2:
        return rows
    width = min(32, KEY_BITS // len(columns))
    ranks = [_scaled_rank(_column(rows, name), width) for name in columns]
    keys = np.zeros(rows.num_rows, dtype=np.uint64)
    count = len(ranks)
    for bit in range(width):
        for index, rank in enumerate(ranks):
            # the first column's bit is the most significant of each group of ``count`` bits
            place = np.uint64(bit * count + count - 1 - index)
            keys |= ((rank >> np.uint64(bit)) & np.uint64(1)) << place
    return rows.take(pa.array(np.argsort(keys, kind="stable")))


def _column(rows: pa.Table, name: str) -> pa.ChunkedArray | pa.Array:
    first, *rest = name.split(".")
    column: pa.ChunkedArray | pa.Array = rows.column(first)
    for field in rest:
        column = pc.struct_field(column, field)
    return column


def _scaled_rank(column: pa.ChunkedArray | pa.Array, width: int) -> np.ndarray:
    """Each value's dense rank from 0 (nulls after every value), scaled into ``width`` bits."""
    ranks = pc.rank(column, sort_keys="ascending", tiebreaker="dense")  # nulls at the end
    values = ranks.to_numpy().astype(np.uint64) - np.uint64(1)
    top = int(values.max()) if len(values) else 0
    limit = (1 << width) - 1
    if top <= limit:
        return values
    scaled = np.floor(values.astype(np.float64) * (limit / top))
    return scaled.astype(np.uint64)
