"""``unstick serve``: the incident API and pages over a database.

The composition root of the HTTP side: settings once, then the engine, the
session factory, the schema upgrade, the Jinja environment and the app, all
built here and passed down.
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
from agent.database import open_engine
from agent.settings import Settings, add_api_arguments, add_db_arguments
from storage.engine import create_sessionmaker, redact_db_url
from storage.migrate import head_revision, is_up_to_date, upgrade

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve the incident history API and pages",
        description="Serve the incident history API (/api/v1), its OpenAPI document and the web pages over a database.",
    )
    add_db_arguments(p)
    add_api_arguments(p)
    p.set_defaults(func=run, require_tokens=True)


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    asyncio.run(serve(settings))
    return 0


async def serve(
    settings: Settings, *, started: asyncio.Event | None = None, stop: asyncio.Event | None = None
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set)."""
    engine = await open_engine(settings.db.url)
    try:
        if settings.db.auto_migrate:
            await upgrade(engine)
            log.info("database %s at revision %s", redact_db_url(settings.db.url), head_revision())
        schema_ok = settings.db.auto_migrate or await is_up_to_date(engine)
        if not schema_ok:
            log.warning(
                "database schema is not at revision %s: run `unstick db upgrade`; /readyz says not ready",
                head_revision(),
            )
        app = create_app(
            sessions=create_sessionmaker(engine),
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
            await stop.wait()
        finally:
            await runner.cleanup()
    finally:
        await engine.dispose()
