"""Arrow columns read as NumPy arrays through their buffers.

pyarrow imports pandas (0.2–0.4 s) the first time a column is converted to or from NumPy or a Python
sequence (``to_numpy``, ``pa.array``, ``take`` of a list): a reader that answers from the task table
in well under a second cannot pay that, nor can a worker.  A numeric column without nulls is its
values buffer, so these read such columns in place.  Columns made from Python values are
``store.columns``'s, which needs no NumPy.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

_DTYPES = {
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint64(): np.uint64,
    pa.float64(): np.float64,
}


def whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array: its one chunk as it is, several combined.  A column of no chunks (a query
    that found no rows) is an empty array made here, since ``combine_chunks`` makes it of an empty
    Python list, which imports pandas (a first read of the task table, still empty, paid 0.15 s)."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    if not column.num_chunks:
        return pa.nulls(0, column.type)
    return column.combine_chunks()


def numbers(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a numeric column without nulls (int32, int64, uint64 or float64), as NumPy.

    One chunk is read in place; several are combined first.
    """
    array_ = whole(column)
    dtype = _DTYPES.get(array_.type)
    if dtype is None or array_.null_count:
        raise TypeError(f"not a numeric column without nulls: {array_.type}, {array_.null_count} nulls")
    return np.frombuffer(
        array_.buffers()[1], dtype=dtype, count=len(array_), offset=array_.offset * array_.type.byte_width
    )


def int64_array(values: Any) -> pa.Array:
    """Row numbers (an int64 NumPy array, or ``array("q")``) as an Arrow array over the same buffer."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def taken(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """The values of ``column`` at ``rows`` (an int64 NumPy array, in any order), taken chunk by chunk.

    Arrow's ``take`` of a column of several chunks first joins them into one array: a copy of the
    whole column, which for a window of 25,000 of 500,000 tasks' ``operations`` is 190 MB of text
    (0.35 s the first time, most of it in touching fresh memory).
    """
    starts = np.cumsum([0, *(len(chunk) for chunk in column.chunks)], dtype=np.int64)
    which = np.searchsorted(starts, rows, side="right") - 1
    by_chunk = np.argsort(which, kind="stable")
    edges = np.searchsorted(which[by_chunk], np.arange(column.num_chunks + 1))
    parts = [
        column.chunk(k).take(int64_array(rows[by_chunk[a:z]] - starts[k]))
        for k, (a, z) in enumerate(pairwise(edges))
        if z > a
    ]
    if not parts:
        return pa.nulls(0, column.type)
    back = np.empty_like(by_chunk)
    back[by_chunk] = np.arange(len(by_chunk))
    return pa.concat_arrays(parts).take(int64_array(back))
