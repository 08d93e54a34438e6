"""Suite-wide test ordering.

The real-cluster tier (``realcluster`` marker) runs after everything else, so a
cold build of the control plane, started in the background by ``scripts/test``,
overlaps the rest of the suite instead of delaying it.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("realcluster") is not None)
