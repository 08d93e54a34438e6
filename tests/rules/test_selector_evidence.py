"""node-selector-mismatch evidence: every existing value of the key with its node
count (not only the nearest), and a required term labels.NewRequirement refuses is
named as such."""

from __future__ import annotations

from tests.rules.placement_fixtures import deployment, findings, node, snapshot, template

GPUS = {"a100": 2, "h100": 1, "l4": 3, "t4": 1, "v100": 1}


def gpu_nodes() -> list[dict]:
    out = []
    for value, count in GPUS.items():
        out += [node(f"{value}-{i}", labels={"gpu-type": value}) for i in range(count)]
    return out


def test_every_value_of_the_key_is_listed_with_its_node_count() -> None:
    snap = snapshot(
        *gpu_nodes(), deployment("train", template(app="train", node_selector={"gpu-type": "a10"}))
    )
    [f] = findings(snap, "node-selector-mismatch")
    [clause] = f.evidence["clauses"]
    assert clause["key_values"] == [
        {"value": "l4", "nodes": 3},
        {"value": "a100", "nodes": 2},
        {"value": "h100", "nodes": 1},
        {"value": "t4", "nodes": 1},
        {"value": "v100", "nodes": 1},
    ]
    # The explanation shows four of them and says how many more there are.
    assert clause["values_not_shown"] == 1
    assert "and 1 more values" in f.explanation
    assert "parse_error" not in clause


def test_a_required_term_with_an_invalid_value_is_named_as_not_parsing() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu-type", "operator": "NotIn", "values": ["a100 h100"]}]}
                ]
            }
        }
    }
    snap = snapshot(*gpu_nodes(), deployment("train", template(app="train", affinity=affinity)))
    [f] = findings(snap, "node-selector-mismatch")
    [clause] = f.evidence["clauses"]
    assert clause["nodes_matching"] == 0
    assert clause["parse_error"].startswith('values[0][gpu-type]: Invalid value: "a100 h100"')
    assert "labels.NewRequirement refuses it" in f.explanation
