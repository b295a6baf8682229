"""README.md runs as written: its shell blocks, pasted in order into one
fresh bash, against the server its own block starts (on a free port)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mapapi import config

from .helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^ *```sh\n(.*?)^ *```", re.S | re.M)
#: Blocks that install into the virtual environment: the test runs in this one.
INSTALLS = re.compile(r"\bpip install\b")


def shell_blocks() -> list[str]:
    return [block for block in BLOCK.findall(README.read_text()) if not INSTALLS.search(block)]


def test_the_readme_s_shell_blocks_run_in_order_in_a_fresh_shell(tmp_path):
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "mapapi").exists():
        pytest.skip("the mapapi console script is not installed beside this interpreter")
    port = str(free_port())
    # The one change: the README's port (8080) becomes a free one.
    blocks = [
        block.replace("mapapi serve &", f"mapapi serve --port {port} &").replace("8080", port)
        for block in shell_blocks()
    ]
    assert any(f"mapapi serve --port {port} &" in block for block in blocks)
    script = "\n".join(
        [
            "set -euo pipefail",
            # Whatever happens, the server the README starts stops with the script.
            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
            *(f"echo '--- block {number}' >&2\n{block}" for number, block in enumerate(blocks)),
        ]
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"  # as `. .venv/bin/activate` does
    env["MAPAPI_INSTANCE_PATH"] = str(tmp_path / "instance")
    env["TMPDIR"] = str(tmp_path / "tmp")  # where mktemp makes the walk-through's folder
    (tmp_path / "tmp").mkdir()
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert '"slug":"coffee-in-paris"' in out
    assert out.count('"name":"Favourites"') >= 4  # each location, twice, on its layer
    assert '"total":2' in out
    assert "MISSING_API_KEY" in out and 'www-authenticate: bearer realm="mapapi"' in out.lower()
    (openapi,) = (tmp_path / "tmp").glob("*/mapapi-openapi.json")
    assert openapi.stat().st_size > 10_000
    # The walk-through writes its files into a temporary folder, never the clone.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["instance", "tmp"]
    assert "Traceback" not in result.stderr


def test_the_readme_table_lists_every_setting_with_its_default():
    text = README.read_text()
    rows = {
        row.split("|")[1].strip().strip("`"): row.split("|")[2].strip()
        for row in text.splitlines()
        if row.startswith("| `MAPAPI_")
    }
    for setting in config.SETTINGS:
        assert setting.env in rows, setting.env
        if setting.default:
            assert f"`{setting.default}`" == rows[setting.env], (setting.env, rows[setting.env])
