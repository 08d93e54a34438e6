"""Reading a KubeSchedulerConfiguration file (the I/O half; parsing and
validation are pure, in :mod:`analyzers.simulator.schedconfig`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import yaml

from analyzers.simulator.schedconfig import ConfigError, parse_config
from analyzers.simulator.scoring.profile import Profile
from analyzers.simulator.versions import VersionError, parse_version

MAX_CONFIG_BYTES = 1 << 20  # a scheduler configuration is a few KiB; refuse anything huge
NEWEST = (1, 37)  # the newest release simulated: a file is validated as it when no release is known
OLDEST_CHECKED = (1, 23)  # the oldest release serving an apiVersion parsed here (v1beta3)


class SchedulerConfigError(ValueError):
    """One line naming the file and the field."""


@dataclass(frozen=True)
class SchedulerConfigFile:
    """A KubeSchedulerConfiguration as read from its file, not yet validated: what is valid
    depends on the release that runs it (``v1beta3`` is refused from 1.29, the
    RequestedToCapacityRatio ``shape`` needs 1.37, …), which is known only once the dump or
    the API server says it. :meth:`profiles` validates for that release."""

    path: str
    doc: Any

    def profiles(self, kube_version: str | None = None) -> dict[str, Profile]:
        """The profiles by schedulerName, validated as ``kube_version`` ("1.30"; the newest
        release simulated when None) validates them."""
        release = NEWEST
        if kube_version:
            with contextlib.suppress(VersionError):
                major, minor, _ = parse_version(kube_version)
                release = (major, minor)
        try:
            return parse_config(self.doc, kube_version=release)
        except ConfigError as exc:
            on = f" (Kubernetes {release[0]}.{release[1]})" if kube_version else ""
            raise SchedulerConfigError(f"{self.path}: {exc}{on}") from None

    def check(self) -> None:
        """Refuse a file no release accepts (a typo, a wrong type), before any cluster is
        known; the release-specific checks wait for :meth:`profiles`."""
        errors = []
        for minor in range(OLDEST_CHECKED[1], NEWEST[1] + 1):
            try:
                parse_config(self.doc, kube_version=(1, minor))
                return
            except ConfigError as exc:
                errors.append(exc)
        raise SchedulerConfigError(f"{self.path}: {errors[-1]}")


def read_scheduler_config(path: str) -> SchedulerConfigFile:
    """The file read and parsed as YAML (one line naming the file for anything wrong)."""
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
    return SchedulerConfigFile(path, doc)
