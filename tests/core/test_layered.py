"""The state's copy-on-write collections (analyzers.snapshot.LayeredDict) behave exactly as
a dict given the same writes, in order too, and a frozen view never changes after."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.snapshot import LayeredDict

keys = st.integers(0, 12)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, st.integers()),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("freeze")),
        st.tuples(st.just("compact")),
    ),
    max_size=60,
)


def contents(mapping: Any) -> tuple[list[Any], list[Any], list[Any], int]:
    return list(mapping), list(mapping.values()), list(mapping.items()), len(mapping)


@settings(max_examples=300)
@given(ops)
def test_a_layered_dict_is_a_dict_and_its_frozen_views_do_not_move(steps: list[tuple[Any, ...]]) -> None:
    plain: dict[int, int] = {}
    layered = LayeredDict()
    frozen: list[tuple[Any, tuple[Any, ...]]] = []
    for step in steps:
        if step[0] == "set":
            plain[step[1]] = step[2]
            layered[step[1]] = step[2]
        elif step[0] == "delete":
            assert plain.pop(step[1], None) == layered.pop(step[1], None)
        elif step[0] == "freeze":
            view = layered.frozen()
            frozen.append((view, contents(view)))
        else:
            layered.compact()
        assert contents(layered) == contents(plain)
        assert list(layered.materialized().items()) == list(plain.items())
        for key in range(13):
            assert layered.get(key) == plain.get(key)
            assert (key in layered) == (key in plain)
    for view, seen in frozen:
        assert contents(view) == seen
