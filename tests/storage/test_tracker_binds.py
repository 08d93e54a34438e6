"""The tracker's own conversion of timestamps for SQLite writes exactly what the column type
(``UTCDateTime`` over SQLAlchemy's SQLite DATETIME) writes, and refuses what it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql, sqlite

from storage import tracker
from storage.models import Incident

COLUMN = Incident.__table__.c.last_seen
SQLITE = sqlite.dialect()


def _type_processor() -> object:
    return COLUMN.type.dialect_impl(SQLITE).bind_processor(SQLITE)


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(-14 * 60, 14 * 60),
)
def test_sqlite_timestamps_are_written_as_the_column_type_writes_them(wall: datetime, offset: int) -> None:
    value = wall.replace(tzinfo=timezone(timedelta(minutes=offset)))
    fast, slow = tracker._bind_processor(COLUMN, SQLITE), _type_processor()
    assert fast is not slow
    assert fast(value) == slow(value)  # type: ignore[operator]


def test_none_passes_and_a_naive_timestamp_is_refused_as_the_type_refuses_it() -> None:
    fast = tracker._bind_processor(COLUMN, SQLITE)
    assert fast(None) is None
    with pytest.raises(ValueError, match="naive datetime"):
        fast(datetime(2024, 5, 1))
    assert fast(datetime(2024, 5, 1, tzinfo=UTC)) == "2024-05-01 00:00:00.000000"


def test_other_dialects_and_columns_keep_the_type_processor() -> None:
    pg = postgresql.asyncpg.dialect()
    value = datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    assert tracker._bind_processor(COLUMN, pg)(value) == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert tracker._bind_processor(Incident.__table__.c.occurrences, SQLITE) is None
