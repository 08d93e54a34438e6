"""``bits`` (a find loop for sparse masks, one C pass for dense ones) and
``lowest_bits`` list the same indices as reading the mask bit by bit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.simulator.nodeinfo import bits, lowest_bits


def _one_by_one(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if (mask >> i) & 1]


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 300),
    density=st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0]),
    data=st.data(),
    count=st.integers(0, 20),
)
def test_bits_and_lowest_bits_equal_reading_bit_by_bit(
    size: int, density: float, data: st.DataObject, count: int
) -> None:
    flags = data.draw(st.lists(st.floats(0, 1), min_size=size, max_size=size))
    mask = sum(1 << i for i, f in enumerate(flags) if f < density or (density == 1.0))
    assert bits(mask) == _one_by_one(mask)
    assert lowest_bits(mask, count) == _one_by_one(mask)[:count]
