"""SQLite on a full disk, for real: the database file is capped with ``PRAGMA
max_page_count`` (SQLite then answers ``SQLITE_FULL`` exactly as on a full filesystem) while
the tracker writes a burst of incidents.

What holds afterwards:

* the refused pass fails with SQLite's own clear error ("database or disk is full") and
  writes nothing of itself (one transaction: no half-written incident, no orphan outbox row);
* the file is not corrupt (``PRAGMA integrity_check`` is ``ok``) and what was committed
  before is intact; ``/readyz`` stays 200 (reads still work: the pages keep serving);
* once space returns, the same pass succeeds: every incident once, one outbox row each;
  the recovery time is printed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import event, func, select, text
from sqlalchemy.exc import OperationalError

from agent.api.app import create_app
from agent.settings import ApiSettings, Secret
from analyzers.findings import ObjectRef
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Incident, Notification
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests.storage.factories import T0, finding

NO_STORM = NotifyPolicy(storm_threshold=1_000_000)


async def test_a_full_disk_is_a_clear_error_without_corruption_and_recovers(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/full.db"
    engine = create_engine(url)
    await upgrade(engine)
    limit: dict[str, int | None] = {"pages": None}

    @event.listens_for(engine.sync_engine, "connect")
    def _cap(dbapi_connection: Any, _record: Any) -> None:
        if limit["pages"] is not None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA max_page_count = {int(limit['pages'])}")
            cursor.close()

    sessions = create_sessionmaker(engine)
    first = [finding(ObjectRef("Deployment", "ml", f"early-{i}")) for i in range(3)]
    await track(sessions, cluster="prod", findings=first, now=T0, evaluated=EVERY_SUBJECT, sinks=["webhook"], policy=NO_STORM)
    async with engine.connect() as conn:
        await conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        pages = int((await conn.execute(text("PRAGMA page_count"))).scalar_one())
    limit["pages"] = pages + 2  # room for almost nothing more
    await engine.dispose()  # every new connection gets the cap

    burst = first + [
        finding(ObjectRef("Deployment", "ml", f"app-{i:03d}"), explanation="x" * 2000) for i in range(200)
    ]
    api = ApiSettings(tokens=(Secret("t0ken-for-the-fault-tests-0123"),))
    async with TestClient(TestServer(create_app(sessions=sessions, settings=api))) as client:
        try:
            await track(sessions, cluster="prod", findings=burst, now=T0, evaluated=EVERY_SUBJECT, sinks=["webhook"], policy=NO_STORM)
        except OperationalError as exc:
            error = str(exc.orig)
        else:
            raise AssertionError("a pass larger than the space left was written")
        assert error == "database or disk is full", error
        assert (await client.get("/readyz")).status == 200
        assert (await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {api.tokens[0].reveal()}"})).status == 200
    async with engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA integrity_check"))).scalar_one() == "ok"
    async with sessions() as s:
        assert await s.scalar(select(func.count()).select_from(Incident)) == 3  # the refused pass left nothing
        assert await s.scalar(select(func.count()).select_from(Notification)) == 3

    limit["pages"] = None  # space returns
    await engine.dispose()
    started = time.monotonic()
    await track(sessions, cluster="prod", findings=burst, now=T0, evaluated=EVERY_SUBJECT, sinks=["webhook"], policy=NO_STORM)
    recovery = time.monotonic() - started
    async with sessions() as s:
        per_fingerprint = (await s.execute(select(Incident.fingerprint, func.count()).group_by(Incident.fingerprint))).all()
        rows = await s.scalar(select(func.count()).select_from(Notification))
    async with engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA integrity_check"))).scalar_one() == "ok"
    await engine.dispose()
    assert len(per_fingerprint) == len(burst) and {n for _, n in per_fingerprint} == {1}
    assert rows == len(burst)
    print(f"\nSQLite full: refused with {error!r}, file intact; the pass succeeded {recovery:.2f} s after space returned")
