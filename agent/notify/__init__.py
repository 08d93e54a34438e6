"""Notifications: the outbox worker and the sinks behind one interface.

* ``base``: the :class:`~agent.notify.base.Sink` interface and delivery outcomes;
* ``worker``: :class:`~agent.notify.worker.OutboxWorker`, claims, sends, retries, dead-letters;
* ``render``: Block Kit, the text forms (Jinja2 templates in ``templates/``);
* ``slack``, ``webhook``, ``console``: the sinks; ``settings``: their options;
* ``metrics``: the notifier's Prometheus metrics.
"""
