"""Suite-wide settings: test ordering and Hypothesis's profile.

The real-cluster tier (``realcluster`` marker) runs after everything else, so a
cold build of the control plane, started in the background by ``scripts/test``,
overlaps the rest of the suite instead of delaying it.

Hypothesis draws the same examples on every run (profile ``ci``, derandomized),
so a test run is reproducible and a commit's verdict does not depend on luck.
New examples are explored with ``UNSTICK_HYPOTHESIS=explore`` (random draws),
best with more of them: ``UNSTICK_PROPERTY_EXAMPLES=20000`` for the message
properties. What an exploring run finds becomes a fixed test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("UNSTICK_HYPOTHESIS", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("realcluster") is not None)
