"""``mapapi db upgrade`` and the first ``serve`` on an empty PostgreSQL
database, started at the same moment as real processes: neither fails, the
schema is made once."""

import os
import subprocess

import pytest
import requests
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from mapapi.storage.upgrade import MIGRATIONS

from . import backends
from .helpers import ServeProcess, mapapi_program

ROUNDS = 3


def command_env(tmp_path, database_url) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env.update(
        MAPAPI_DATABASE_URL=database_url,
        MAPAPI_INSTANCE_PATH=str(tmp_path / "instance"),
        MAPAPI_BOOTSTRAP="1",
    )
    return env


def schema_state(database_url) -> tuple[list[str], int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            versions = list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
            accounts = connection.execute(text("SELECT count(*) FROM accounts")).scalar_one()
    finally:
        engine.dispose()
    return versions, accounts


def heads() -> list[str]:
    return sorted(ScriptDirectory(MIGRATIONS).get_heads())


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_db_upgrade_and_the_first_serve_run_at_once_on_an_empty_database(
    tmp_path, postgres_server, round_
):
    database_url = backends.create_postgres_database()
    env = command_env(tmp_path, database_url)
    servers, upgrades = [], []
    try:
        # Two of each, started together: without the shared lock two of
        # them create the same tables and one fails.
        for name in ("first", "second"):
            upgrades.append(
                subprocess.Popen(
                    [mapapi_program(), "db", "upgrade"], cwd=tmp_path, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
            )
            servers.append(ServeProcess(env, tmp_path, f"{name}-{round_}"))
        for upgrade in upgrades:
            _out, err = upgrade.communicate(timeout=60)
            assert upgrade.returncode == 0, err
            assert "Traceback" not in err
        for server in servers:
            server.wait_until_up(seconds=60)
            assert requests.get(server.base + "/healthz", timeout=5).status_code == 200
        printed = [line for server in servers for line in server.stdout().splitlines()]
        assert len(printed) == 1 and printed[0].startswith("mk_live_"), printed  # one first key
        versions, accounts = schema_state(database_url)
        assert sorted(versions) == heads() and accounts == 1
    finally:
        for server in servers:
            server.stop()
        for upgrade in upgrades:
            if upgrade.poll() is None:
                upgrade.kill()
        backends.drop_postgres_database(database_url)
    for server in servers:
        assert "Traceback" not in server.stderr()
