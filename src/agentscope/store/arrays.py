"""Numeric Arrow columns read as NumPy arrays, and index arrays made, through their buffers.

pyarrow imports pandas (0.2–0.4 s) the first time a column is converted to or from NumPy or a Python
sequence (``to_numpy``, ``pa.array``, ``take`` of a list): a reader that answers from the task table
in well under a second cannot pay that, nor can a worker.  A numeric column without nulls is its
values buffer, so these read and make such columns in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_DTYPES = {
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint64(): np.uint64,
    pa.float64(): np.float64,
}


def numbers(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a numeric column without nulls (int32, int64, uint64 or float64), as NumPy.

    One chunk is read in place; several are combined first.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    dtype = _DTYPES.get(array.type)
    if dtype is None or array.null_count:
        raise TypeError(f"not a numeric column without nulls: {array.type}, {array.null_count} nulls")
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * array.type.byte_width
    )


def int64_array(values: Any) -> pa.Array:
    """Row numbers (an int64 NumPy array, or ``array("q")``) as an Arrow array over the same buffer."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
