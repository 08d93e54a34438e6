"""Reading a KubeSchedulerConfiguration file (the I/O half; parsing and
validation are pure, in :mod:`analyzers.simulator.schedconfig`)."""

from __future__ import annotations

import yaml

from analyzers.simulator.schedconfig import ConfigError, parse_config
from analyzers.simulator.scoring.profile import Profile

MAX_CONFIG_BYTES = 1 << 20  # a scheduler configuration is a few KiB; refuse anything huge


class SchedulerConfigError(ValueError):
    """One line naming the file and the field."""


def load_scheduler_config(path: str, *, kube_version: tuple[int, int] = (1, 37)) -> dict[str, Profile]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SchedulerConfigError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise SchedulerConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = yaml.safe_load(raw.decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise SchedulerConfigError(f"{path}: not YAML{where}") from None
    try:
        return parse_config(doc, kube_version=kube_version)
    except ConfigError as exc:
        raise SchedulerConfigError(f"{path}: {exc}") from None
