"""Fault tests: real parts (PostgreSQL, SQLite files, HTTP receivers, processes) failed on
purpose under the agent; each test states what holds afterwards and prints how long
recovery took (``pytest -s`` shows the figures)."""

from tests.storage.conftest import db_url, engine, pg_server, sessions

__all__ = ["db_url", "engine", "pg_server", "sessions"]
