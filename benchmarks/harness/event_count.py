"""Events recorded in a stretch of time, read from mapapi's events table."""

from __future__ import annotations


class EventCounter:
    """Counts the rows of the events table added since a mark.

    A mark is the newest event id; the events after it are counted by id
    (an index range, cheap however many events the run has made before).
    The benchmark's account is the only one that writes, and its events take
    their ids in commit order (see mapapi/services/events.py), so no event
    can appear later below a mark.
    """

    def __init__(self, database_url: str):
        from sqlalchemy import bindparam, create_engine, func, select

        from mapapi.storage.models import Event

        self.engine = create_engine(database_url)
        self._newest = select(func.coalesce(func.max(Event.id), 0))
        self._after = select(func.count()).select_from(Event).where(Event.id > bindparam("mark"))

    def mark(self) -> int:
        with self.engine.connect() as connection:
            return connection.scalar(self._newest)

    def since(self, mark: int) -> int:
        with self.engine.connect() as connection:
            return connection.scalar(self._after, {"mark": mark})

    def close(self) -> None:
        self.engine.dispose()
