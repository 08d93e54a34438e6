"""One module per ``unstick`` sub-command. Each exposes
``register(subparsers) -> None``, which adds its parser and sets
``func`` (a callable taking the parsed namespace and returning an exit code)."""
