"""Remedies: YAML a user can apply as is, rendered from Jinja2 templates.

Templates live in ``analyzers/remedies/templates.py`` (a dict, so rendering
needs no file access and the core stays pure). ``build_environment`` makes the
one Jinja2 environment (StrictUndefined: a missing variable is a bug, never an
empty string); the composition root builds it once and passes it down through
the rule context. Every rendered document is parsed back with PyYAML before it
is handed out, so a remedy is always valid YAML.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import jinja2
import yaml

from analyzers.findings import ObjectRef, Remedy, RemedyKind
from analyzers.remedies.templates import TEMPLATES

# The safe loader, with libyaml's parser when PyYAML was built with it (several
# times faster; every remedy of every analysis pass is parsed back).
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RemedyTemplateError(ValueError):
    pass


def _to_yaml(value: Any, indent: int = 0) -> str:
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip("\n")
    if indent:
        pad = " " * indent
        text = "\n".join(pad + line if line else line for line in text.splitlines())
    return text


def _to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def build_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.DictLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["to_yaml"] = _to_yaml
    env.filters["to_json"] = _to_json
    env.filters["shquote"] = shlex.quote
    return env


class RemedyRenderer:
    """Renders remedy templates and builds Remedy values."""

    def __init__(self, env: jinja2.Environment | None = None) -> None:
        self.env = env or build_environment()

    def render(self, template: str, **variables: Any) -> str:
        text = self.env.get_template(template).render(**variables)
        try:
            list(yaml.load_all(text, Loader=_SafeLoader))
        except yaml.YAMLError as exc:  # pragma: no cover - a template bug
            raise RemedyTemplateError(f"template {template} rendered invalid YAML: {exc}") from exc
        return text

    def patch(
        self,
        title: str,
        target: ObjectRef,
        patch: dict[str, Any],
        *,
        verified: bool,
        verification: str,
        patch_type: str = "strategic",
    ) -> Remedy:
        """A ``kubectl patch`` remedy: the YAML is the patch itself."""
        text = self.render("patch.yaml.j2", patch=patch)
        command = (
            f"kubectl patch {target.kind.lower()} {shlex.quote(target.name)}"
            + (f" -n {shlex.quote(target.namespace)}" if target.namespace else "")
            + f" --type {patch_type} -p {shlex.quote(_to_json(patch))}"
        )
        return Remedy(title, RemedyKind.PATCH, target, text, command, verified, verification)

    def manifest(
        self,
        title: str,
        target: ObjectRef | None,
        template: str,
        *,
        verified: bool,
        verification: str,
        command: str = "kubectl apply -f -",
        **variables: Any,
    ) -> Remedy:
        """A complete manifest; ``command`` applies it (the manifest on stdin) and
        does whatever else the change needs."""
        text = self.render(template, **variables)
        return Remedy(title, RemedyKind.MANIFEST, target, text, command, verified, verification)

    def command(
        self,
        title: str,
        target: ObjectRef | None,
        command: str,
        *,
        verified: bool,
        verification: str,
        note: str = "",
    ) -> Remedy:
        text = self.render("command.yaml.j2", command=command, note=note)
        return Remedy(title, RemedyKind.COMMAND, target, text, command, verified, verification)
