"""Arrow columns made from Python values through their buffers, without NumPy.

``pa.array`` of Python values imports pandas (0.2–0.4 s), which neither a reader answering from the
task table nor an app recording spans can pay; and the recording install has no NumPy at all (the
SDK's writer thread builds its batches here).  A number column is an ``array.array``'s bytes, a
string column its offsets and UTF-8 bytes, a boolean column packed bits.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, chain
from typing import Any

import pyarrow as pa

_TYPECODES = {pa.int32(): "i", pa.int64(): "q", pa.float64(): "d"}
_AS_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


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
    except (TypeError, ValueError, AttributeError, OverflowError):
        pass
    return pa.array(values, type=type)


def _numbers_with_nulls(values: Sequence[Any], type: pa.DataType, code: str) -> pa.Array:
    data = array(code, [0 if value is None else value for value in values])
    valid, nulls = _validity(values)
    return pa.Array.from_buffers(type, len(values), [valid, pa.py_buffer(data)], nulls)


def _strings(values: Sequence[str | None]) -> pa.Array:
    encoded = [b"" if value is None else value.encode() for value in values]
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, encoded)))
    valid, nulls = _validity(values)
    data = pa.py_buffer(b"".join(encoded))
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), data, valid, nulls)


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    """Where ``values`` are not None, as Arrow's validity bits (none when every value is), and how
    many are None."""
    nulls = values.count(None)
    return (_bits([value is not None for value in values]) if nulls else None), nulls


def _bits(flags: Sequence[bool]) -> pa.Buffer:
    """Arrow's bit-packed booleans (least significant bit first): the flags, last first, read as one
    binary number.  A flag that is not a bool (None, most often) raises, and the caller falls back to
    ``pa.array``, which knows nulls."""
    digits = bytes(flags[::-1]).translate(_AS_DIGITS)
    return pa.py_buffer(int(digits or b"0", 2).to_bytes((len(flags) + 7) // 8, "little"))
