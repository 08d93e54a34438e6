"""``unstick serve``: the incident API and pages over a database.

The composition root of the HTTP side: settings once, then the engine, the
session factory, the schema upgrade, the Jinja environment and the app, all
built here and passed down. With notification options it also drains the
outbox (what ``unstick worker`` fleets write): several ``serve`` replicas may
do so on one PostgreSQL, since a claimed message is leased to one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from aiohttp import web

from agent.api.app import app_runner, create_app
from agent.api.pages import build_jinja_env
from agent.cli import UserError
from agent.database import migrate, open_engine
from agent.notify.settings import NotifySettings, add_notify_arguments
from agent.settings import Settings, SettingsError, add_api_arguments, add_db_arguments
from storage.engine import create_sessionmaker, redact_db_url
from storage.migrate import head_revision, is_up_to_date

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve the incident history API and pages",
        description="Serve the incident history API (/api/v1), its OpenAPI document and the web pages over a database.",
    )
    add_db_arguments(p)
    add_api_arguments(p)
    add_notify_arguments(p)
    p.set_defaults(func=run, require_tokens=True)


def run(args: argparse.Namespace) -> int:
    problems: list[str] = []
    try:
        settings = Settings.from_args(args)
    except SettingsError as exc:  # every problem of both groups at once
        problems += exc.errors
    try:
        notify = NotifySettings.from_args(args)
    except SettingsError as exc:
        problems += exc.errors
    if problems:
        raise SettingsError(problems)
    asyncio.run(serve(settings, notify=notify))
    return 0


async def serve(
    settings: Settings,
    *,
    notify: NotifySettings | None = None,
    started: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set)."""
    engine = await open_engine(settings.db.url, options=settings.db.engine)
    try:
        if settings.db.auto_migrate:
            await migrate(engine, settings.db.url)
            log.info("database %s at revision %s", redact_db_url(settings.db.url), head_revision())
        schema_ok = settings.db.auto_migrate or await is_up_to_date(engine)
        if not schema_ok:
            log.warning(
                "database schema is not at revision %s: run `unstick db upgrade`; /readyz says not ready",
                head_revision(),
            )
        sessions = create_sessionmaker(engine)
        app = create_app(
            sessions=sessions,
            settings=settings.api,
            jinja=build_jinja_env(),
            readiness=lambda: schema_ok,
        )
        runner = app_runner(app, settings.api)
        await runner.setup()
        try:
            site = web.TCPSite(runner, settings.api.host, settings.api.port)
            try:
                await site.start()
            except OSError as exc:
                raise UserError(
                    f"--listen {settings.api.host}:{settings.api.port}: cannot listen there: {exc.strerror or exc}"
                ) from None
            notifier = None
            if notify is not None:
                notifier = await notify.start_worker(
                    sessions, base_url=f"http://{settings.api.host}:{settings.api.port}"
                )
            if notifier is not None:
                print(
                    f"unstick: sending notifications to {', '.join(notifier.sink_names)}",
                    file=sys.stderr,
                    flush=True,
                )
            auth = "bearer tokens" if settings.api.auth else "NO AUTHENTICATION"
            print(
                f"unstick: serving incidents on http://{settings.api.host}:{settings.api.port} ({auth})",
                file=sys.stderr,
                flush=True,
            )
            stop = stop or asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, stop.set)
            if started is not None:
                started.set()
            try:
                await stop.wait()
            finally:
                if notifier is not None:
                    await notifier.stop()
        finally:
            await runner.cleanup()
    finally:
        await engine.dispose()
