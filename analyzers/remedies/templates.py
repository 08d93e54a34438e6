"""Jinja2 templates of remedies, by name. Each renders valid YAML."""

from __future__ import annotations

TEMPLATES: dict[str, str] = {
    # A strategic-merge or merge patch, shown as YAML (``kubectl patch … -p`` takes the JSON form).
    "patch.yaml.j2": "{{ patch | to_yaml }}\n",
    # A command remedy, recorded as YAML for the API and pages.
    "command.yaml.j2": """\
# Run:
#   {{ command }}
{% if note %}
# {{ note }}
{% endif %}
command: {{ command | to_json }}
""",
    "limitrange.yaml.j2": """\
apiVersion: v1
kind: LimitRange
metadata:
  name: {{ name }}
  namespace: {{ namespace }}
spec:
  limits:
  - type: Container
    defaultRequest:
{{ default_request | to_yaml(6) }}
{% if default_limit %}
    default:
{{ default_limit | to_yaml(6) }}
{% endif %}
""",
    "pdb.yaml.j2": """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ name }}
  namespace: {{ namespace }}
spec:
{{ spec | to_yaml(2) }}
""",
    "object.yaml.j2": "{{ obj | to_yaml }}\n",
    # A descheduler policy in the ConfigMap its Helm chart mounts (insufficient-resources).
    "descheduler-policy.yaml.j2": """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ name }}
  namespace: {{ namespace }}
data:
  policy.yaml: |
{{ policy | to_yaml(4) }}
""",
    # NVIDIA GPU Operator time-slicing for one node: the device plugin's config
    # (k8s-device-plugin config v1, sharing.timeSlicing) in the ConfigMap that
    # ClusterPolicy spec.devicePlugin.config.name names; a node takes the entry
    # its nvidia.com/device-plugin.config label names. Source: NVIDIA GPU
    # Operator docs, "Time-Slicing GPUs in Kubernetes" (gpu-sharing.html).
    "nvidia-time-slicing.yaml.j2": """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ name }}
  namespace: {{ namespace }}
data:
  {{ key }}: |-
    version: v1
    flags:
      migStrategy: none
    sharing:
      timeSlicing:
        resources:
        - name: {{ resource }}
          replicas: {{ replicas }}
""",
}
