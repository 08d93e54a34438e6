"""Alembic environment: async engines, the store's metadata, SQLite batch mode.

Two ways in:

* from code (:mod:`storage.migrate`, used by ``unstick db upgrade`` and the
  automatic upgrade at start-up): a live connection arrives in
  ``config.attributes["connection"]`` and is used as is;
* from the ``alembic`` command line (developers, ``alembic.ini`` at the top of
  the repository): the URL comes from ``-x db=URL`` or ``sqlalchemy.url``, and
  an async engine is created here.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from storage.engine import DEFAULT_DB_URL, create_engine
from storage.models import Base, include_for_dialect

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("db")
        or config.get_main_option("sqlalchemy.url")
        or DEFAULT_DB_URL
    )


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=True,
        include_object=include_for_dialect(connection.dialect.name),
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
