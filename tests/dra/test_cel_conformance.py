"""Kubernetes' own DRA CEL table (k8s.io/dynamic-resource-allocation v0.37.2,
cel/compile_test.go, kept as data beside this test) against unstick's CEL
environment: every case of the features on by default must agree."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).parent
SCRIPT = HERE.parent.parent / "scripts" / "dra_cel_conformance.py"


def test_every_default_feature_case_of_kubernetes_cel_table_agrees() -> None:
    spec = importlib.util.spec_from_file_location("dra_cel_conformance", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agree, disagreements, skipped, _ = module.run(HERE / "data" / "cel_compile_test_v0.37.2.go.txt")
    assert disagreements == []
    assert agree >= 36  # the table's cases for 1.37's default features (list-typed attributes are alpha)
    assert skipped > 0
