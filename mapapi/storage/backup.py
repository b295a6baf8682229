"""A consistent copy of the embedded SQLite database, taken while it serves."""

import os
import sqlite3

from ..extensions import db


class BackupError(Exception):
    pass


def backup_sqlite(path: str) -> None:
    """Copy the database to ``path`` with SQLite's online backup API.

    The copy is made in one step, so it is one consistent snapshot; in WAL
    mode that read does not stop the service's writers.
    """
    engine = db.engine
    if engine.dialect.name != "sqlite":
        raise BackupError(
            "db backup copies the embedded SQLite database; back up PostgreSQL with pg_dump "
            "(see docs/deploy.md)."
        )
    if os.path.exists(path):
        raise BackupError(f"{path} exists already; choose a new file.")
    source = engine.raw_connection()
    try:
        target = sqlite3.connect(path)
        try:
            source.driver_connection.backup(target)
        finally:
            target.close()
    finally:
        source.close()
