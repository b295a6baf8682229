"""docs/deploy.md works as written: its environment file reads the same to
systemd's EnvironmentFile= and to a shell, and holds only settings mapapi takes."""

import re
import subprocess
from pathlib import Path

from mapapi import create_app

DEPLOY = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"
ENV_FILE = "# /etc/mapapi/env"


def environment_file() -> str:
    (block,) = [
        block for block in re.findall(r"^```sh\n(.*?)^```", DEPLOY.read_text(), re.S | re.M)
        if block.startswith(ENV_FILE)
    ]  # fmt: skip
    return block


def read_as_systemd(text: str) -> dict:
    """systemd's rules for these lines: comments on lines of their own, NAME=value,
    the value's surrounding double quotes removed, anything else kept as written."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        values[name] = value
    return values


def read_as_a_shell(path: Path) -> dict:
    listed = subprocess.run(
        ["sh", "-c", f'set -a && . "{path}" && set +a && env'],
        capture_output=True, text=True, check=True, env={},
    )  # fmt: skip
    return dict(
        line.split("=", 1) for line in listed.stdout.splitlines() if line.startswith("MAPAPI_")
    )


def test_the_environment_file_reads_the_same_to_systemd_and_to_a_shell(tmp_path):
    text = environment_file()
    path = tmp_path / "env"
    path.write_text(text)
    systemd = read_as_systemd(text)
    assert systemd == read_as_a_shell(path)
    assert all(" #" not in value for value in systemd.values()), systemd
    assert "MAPAPI_DATABASE_URL" in systemd and "MAPAPI_INSTANCE_PATH" in systemd


def test_every_value_of_the_environment_file_is_one_mapapi_takes(monkeypatch, tmp_path):
    for name, value in read_as_systemd(environment_file()).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MAPAPI_INSTANCE_PATH", str(tmp_path))
    app = create_app()  # raises SettingError on a value it does not take
    assert app.config["BOOTSTRAP"] is False
    assert app.config["TRUSTED_PROXIES"] == 1
    assert app.config["RATELIMIT_GENERAL"] == "1000 per hour"


def test_the_admin_wrapper_reads_the_file_as_systemd_does_not_with_a_shell(tmp_path):
    import json
    import os
    import sys

    from mapapi.envfile import parse_environment

    text = DEPLOY.read_text()
    (wrapper,) = re.findall(r"^exec runuser .*$", text, re.M)
    assert "-m mapapi.envfile /etc/mapapi/env" in wrapper and ". /etc/mapapi/env" not in wrapper
    assert "mapapi-admin config check --env-file /etc/mapapi/env" in text
    assert parse_environment(environment_file()) == read_as_systemd(environment_file())
    path = tmp_path / "env"
    path.write_text(environment_file() + "MAPAPI_BOOTSTRAP=0 # an inline comment\n")
    show = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('MAPAPI_')}))"
    own = "MAPAPI_" + "OWN_VARIABLE"  # the caller's own: not the unit's
    env = {**os.environ, own: "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mapapi.envfile", str(path), sys.executable, "-c", show],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    seen = json.loads(done.stdout)
    assert seen == parse_environment(path.read_text())
    assert seen["MAPAPI_BOOTSTRAP"] == "0 # an inline comment"  # as systemd: then refused by mapapi
    assert own not in seen
