"""Evidence reads as tables and sentences; remedies read as what a user runs.

The incident page renders every evidence value (``agent.api.evidence``) as a
sentence, a list or a table, with the raw JSON one click away; a patch remedy
comes with a complete manifest for ``kubectl apply --server-side``,
downloadable; a command remedy is a command, not YAML; the demo's apply
button appears only where applying changes the demo cluster."""

from __future__ import annotations

import html as htmllib
import json
import re
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient

from agent.api.evidence import label, present, present_value
from agent.api.remedy_view import apply_manifest, parse_patch_command, remedy_views
from agent.fakecluster import FakeCluster
from agent.fakecluster.remedies import changes_cluster

HTML = {"Accept": "text/html"}

# As pdb-blocks-eviction records it (the demo's drain).
PDB_EVIDENCE: dict[str, Any] = {
    "cause": "replacement-unschedulable",
    "eviction_status_code": 429,
    "draining_nodes": [{"node": "node-2", "how": "cordoned"}],
    "blocked_pods": [
        {
            "pod": "storefront-8xpqg",
            "node": "node-2",
            "ready": True,
            "eviction": "pdb-violation",
            "messages": [],
        },
        {
            "pod": "storefront-dss2r",
            "node": "node-2",
            "ready": True,
            "eviction": "pdb-violation",
            "messages": [],
        },
    ],
    "pdbs": [{"name": "storefront", "expected_pods": 3, "desired_healthy": 2, "max_unavailable": None}],
    "workload": {"kind": "Deployment", "namespace": "shop", "name": "storefront"},
    "old_pods": ["a-1", "a-2"],
    "least_allocated_rank": {"node-2": {"score": 94, "rank": 2, "of": 3}},
}


def test_every_evidence_value_becomes_a_sentence_a_list_or_a_table() -> None:
    blocks = {b.key: b for b in present(PDB_EVIDENCE)}
    assert list(blocks) == list(PDB_EVIDENCE)  # nothing dropped, the rule's order kept
    assert blocks["cause"].kind == "text" and blocks["cause"].text == "replacement-unschedulable"
    pods = blocks["blocked_pods"]
    assert pods.kind == "table" and pods.label == "Blocked pods"
    assert pods.columns == ("Pod", "Node", "Ready", "Eviction", "Messages")
    assert pods.rows[1] == ("storefront-dss2r", "node-2", "yes", "pdb-violation", "none")
    pdbs = blocks["pdbs"]
    assert pdbs.label == "PDBs" and pdbs.rows == (("storefront", "3", "2", "—"),)
    assert pdbs.numeric == (False, True, True, False)
    assert blocks["workload"].kind == "pairs" and ("kind", "Deployment") in blocks["workload"].rows
    assert blocks["old_pods"].kind == "list" and blocks["old_pods"].items == ("a-1", "a-2")
    rank = blocks["least_allocated_rank"]  # a map of records: one row per name
    assert rank.kind == "table" and rank.columns == ("Name", "Score", "Rank", "Of")
    assert rank.rows == (("node-2", "94", "2", "3"),)


def test_labels_read_as_words() -> None:
    assert label("eviction_status_code") == "Eviction status code"
    assert label("pdbs") == "PDBs" and label("gpus_free") == "GPUs free"


def test_keys_that_are_data_are_shown_as_written() -> None:
    """Node names, attribute values and resource names are data, not field names: a per-node
    table keeps ``gpu-a`` (not "GPU a") and an attribute value keeps ``A100-80GB``."""
    for data in ("gpu-a", "node1", "A100-80GB", "nvidia.com/gpu", "ip-10-0-1-7.ec2.internal"):
        assert label(data) == data
    block = present_value("devices_per_node", {"in_pools": {"gpu-a": 2, "gpu-b": 1}, "free": {"gpu-a": 0}})
    assert block.columns == ("Name", "gpu-a", "gpu-b")
    assert [row[0] for row in block.rows] == ["In pools", "Free"]


async def test_the_page_shows_evidence_as_tables_with_the_raw_json_one_click_away(
    client: TestClient, auth: dict[str, str]
) -> None:
    html = await (await client.get("/incidents/1", headers={**auth, **HTML})).text()
    api = await (await client.get("/api/v1/incidents/1", headers=auth)).json()
    section = html.split('<section id="evidence">', 1)[1].split("</section>", 1)[0]
    before_raw, raw = section.split('<details class="raw"', 1)
    assert "<pre" not in before_raw  # no JSON dump outside the raw view
    facts = dict(re.findall(r'<tr data-key="(\w+)"><th scope="row">[^<]*</th><td>([^<]*)</td>', before_raw))
    scalars = {k: v for k, v in api["evidence"].items() if not isinstance(v, dict | list)}
    assert facts == {k: str(v) for k, v in scalars.items()}  # the numbers are the API's
    node = re.search(r'id="evidence-node".*?</table>', before_raw, re.S)
    assert node and "<caption>Node</caption>" in node.group(0) and "gpu-node-1" in node.group(0)
    assert "nvidia.com/gpu: 1" in node.group(0)
    raw_json = re.search(r"<pre>(.*?)</pre>", raw, re.S)
    assert raw_json and json.loads(htmllib.unescape(raw_json.group(1))) == api["evidence"]


async def test_a_patch_remedy_downloads_as_a_server_side_apply_manifest(
    client: TestClient, auth: dict[str, str]
) -> None:
    resp = await client.get("/incidents/1/remedies/0.apply.yaml", headers={**auth, **HTML})
    assert resp.status == 200
    assert resp.headers["Content-Disposition"] == 'attachment; filename="incident-1-remedy-0.apply.yaml"'
    obj = yaml.safe_load(await resp.text())
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "Deployment"
    assert obj["metadata"] == {"name": "trainer", "namespace": "ml"}
    assert obj["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    # the second remedy is a command: no manifest
    assert (await client.get("/incidents/1/remedies/1.apply.yaml", headers={**auth, **HTML})).status == 404


def test_the_manifest_names_the_fields_it_owns_and_those_it_cannot_remove() -> None:
    command = (
        "kubectl patch deployment embedder -n ml --type strategic "
        '-p \'{"spec":{"template":{"spec":{"nodeSelector":{"gpu-typ":null,"gpu-type":"a10g"}}}}}\''
    )
    patch_yaml = (
        "spec:\n  template:\n    spec:\n      nodeSelector:\n        gpu-typ: null\n        gpu-type: a10g\n"
    )
    assert parse_patch_command(command) == ("deployment", "embedder", "ml", "strategic")
    manifest = apply_manifest(command, patch_yaml, 7, 0)
    assert manifest is not None
    assert yaml.safe_load(manifest.yaml) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "embedder", "namespace": "ml"},
        "spec": {"template": {"spec": {"nodeSelector": {"gpu-type": "a10g"}}}},
    }
    assert manifest.owned == ("spec.template.spec.nodeSelector.gpu-type",)
    assert manifest.not_removed == ("spec.template.spec.nodeSelector.gpu-typ",)
    assert (
        manifest.command
        == "kubectl apply --server-side --field-manager=unstick -f incident-7-remedy-0.apply.yaml"
    )
    # JSON patches and kinds without a known apiVersion get no manifest
    assert apply_manifest(command.replace("strategic", "json"), patch_yaml, 7, 0) is None
    assert apply_manifest(command.replace("deployment", "widget"), patch_yaml, 7, 0) is None


def test_a_command_remedy_is_a_command_with_its_note_not_yaml() -> None:
    stored = {
        "title": "Label node gpu-0",
        "kind": "command",
        "yaml": "# Run:\n#   kubectl label node gpu-0 gpu-typ=a10g\n# Only if gpu-0 is meant to run it.\n"
        'command: "kubectl label node gpu-0 gpu-typ=a10g"\n',
        "command": "kubectl label node gpu-0 gpu-typ=a10g",
        "verified": False,
        "verification": "",
    }
    [view] = remedy_views([stored], 3)
    assert view.command == "kubectl label node gpu-0 gpu-typ=a10g"
    assert view.note == "Only if gpu-0 is meant to run it."
    assert view.yaml == "" and view.apply is None


def _node(name: str, cordoned: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"unschedulable": True} if cordoned else {},
    }


@pytest.mark.parametrize(
    ("command", "changes"),
    [
        ("kubectl uncordon node-1", True),  # cordoned: uncordoning changes it
        ("kubectl uncordon node-2", False),  # already schedulable: nothing changes
        ("kubectl uncordon node-9", False),  # no such node
        ("kubectl label node node-2 zone=a", True),
        ("kubectl label node node-2 role=x", False),  # the label is there already
        ("kubectl apply -f -", False),  # a manifest on stdin: the demo cannot apply it
        ("kubectl describe node node-1", False),
    ],
)
def test_the_demo_offers_apply_only_where_it_changes_the_cluster(command: str, changes: bool) -> None:
    cluster = FakeCluster()
    cluster.apply(_node("node-1", cordoned=True))
    node2 = _node("node-2", cordoned=False)
    node2["metadata"]["labels"] = {"role": "x"}
    cluster.apply(node2)
    before = json.dumps(cluster.get("Node", "node-1"), sort_keys=True)
    assert changes_cluster(cluster, command) is changes
    assert json.dumps(cluster.get("Node", "node-1"), sort_keys=True) == before  # nothing written


def test_long_values_are_cut_on_the_page_and_counted() -> None:
    from agent.api.evidence import MAX_ROWS, raw_preview

    nodes = [{"node": f"n{i}", "free_cpu": i} for i in range(MAX_ROWS + 50)]
    [table] = present({"eligible_nodes": nodes})
    assert len(table.rows) == MAX_ROWS and table.total == MAX_ROWS + 50
    assert table.rows[-1] == (f"n{MAX_ROWS - 1}", str(MAX_ROWS - 1))
    preview, cut = raw_preview({"eligible_nodes": nodes, "scheduling_grid": [{}], "n": 1}, "scheduling_grid")
    assert cut and preview == {"eligible_nodes": nodes[:MAX_ROWS], "n": 1}
    assert raw_preview({"n": [1, 2]}, "scheduling_grid") == ({"n": [1, 2]}, False)
