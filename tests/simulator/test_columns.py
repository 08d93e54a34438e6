"""nodeinfo.Column: the nodes whose figure is below a bound, from the sorted order and
its prefix bit sets, are exactly those a scan of the figures finds -- for any figures
(negative, repeated, more nodes than one prefix step) and any bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.simulator.nodeinfo import Column, mask_of

figures = st.lists(st.integers(-3, 12) | st.integers(-(2**63), 2**63), max_size=3 * Column.STEP + 5)


@given(values=figures, bounds=st.lists(st.integers(-5, 14) | st.integers(-(2**63), 2**63), max_size=6))
def test_below_is_the_scan(values: list[int], bounds: list[int]) -> None:
    column = Column(values)
    for bound in [*bounds, *values, *(v + 1 for v in values[:3])]:
        assert column.below(bound) == mask_of([i for i, v in enumerate(values) if v < bound], len(values))


@pytest.mark.parametrize("extra", [[], list(range(100, 100 + Column.FEW))], ids=["few figures", "sorted"])
def test_a_step_boundary_of_equal_figures(extra: list[int]) -> None:
    values = [5] * Column.STEP + [7] * Column.STEP + [1] + extra
    column = Column(values)
    assert column.below(6) == mask_of([*range(Column.STEP), 2 * Column.STEP], len(values))
    assert (column._few is None) == bool(extra)  # the path the case is for
    assert column.below(8) == (1 << (2 * Column.STEP + 1)) - 1
    assert column.below(1) == 0
    assert column.below(10**6) == (1 << len(values)) - 1


def test_one_figure_on_every_node() -> None:
    column = Column([3] * 200)
    assert column.below(3) == 0 and column.below(4) == (1 << 200) - 1
    assert Column([]).below(0) == 0
