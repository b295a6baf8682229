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
