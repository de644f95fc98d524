"""Arrow columns read as NumPy arrays, and made from Python lists, through their buffers.

pyarrow imports pandas (0.2–0.4 s) the first time a column is converted to or from NumPy or a Python
sequence (``to_numpy``, ``pa.array``, ``take`` of a list): a reader that answers from the task table
in well under a second cannot pay that, nor can a worker.  A numeric column without nulls is its
values buffer, a string column its offsets and bytes, so these read and make such columns in place.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, chain, pairwise
from typing import Any

import numpy as np
import pyarrow as pa

_DTYPES = {
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint64(): np.uint64,
    pa.float64(): np.float64,
}
_TYPECODES = {pa.int32(): "i", pa.int64(): "q", pa.float64(): "d"}


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


def column(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array of ``type``, built from buffers for what the task table and the
    spans table hold: 32- and 64-bit integers and floats, booleans, strings (None is null in these)
    and lists of those.  Other types, and values a buffer cannot take (a string past 2 GB, a number
    out of range), go through ``pa.array``."""
    try:
        code = _TYPECODES.get(type)
        if code is not None:
            if None in values:
                return _numbers_with_nulls(values, type, code)
            return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(array(code, values))])
        if type == pa.bool_():
            return pa.Array.from_buffers(type, len(values), [None, _bits(values)])
        if type == pa.string():
            return _strings(values)
        if pa.types.is_list(type):
            offsets = array("i", [0])
            offsets.extend(accumulate(map(len, values)))
            flat = column(list(chain.from_iterable(values)), type.value_type)
            return pa.ListArray.from_arrays(column(offsets, pa.int32()), flat)
    except (TypeError, AttributeError, OverflowError):
        pass
    return pa.array(values, type=type)


def _numbers_with_nulls(values: Sequence[Any], type: pa.DataType, code: str) -> pa.Array:
    valid = [value is not None for value in values]
    data = array(code, [0 if value is None else value for value in values])
    nulls = len(values) - sum(valid)
    return pa.Array.from_buffers(type, len(values), [_bits(valid), pa.py_buffer(data)], nulls)


def _strings(values: Sequence[str | None]) -> pa.Array:
    encoded = [b"" if value is None else value.encode() for value in values]
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, encoded)))
    nulls = sum(value is None for value in values)
    valid = _bits([value is not None for value in values]) if nulls else None
    data = pa.py_buffer(b"".join(encoded))
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), data, valid, nulls)


def _bits(flags: Sequence[Any]) -> pa.Buffer:
    """Arrow's bit-packed booleans (least significant bit first)."""
    packed = np.packbits(np.fromiter(flags, dtype=bool, count=len(flags)), bitorder="little")
    return pa.py_buffer(packed)
