"""``--baseline REV``: the mapapi of an earlier commit against the current one, in one run.

Issues ask that ordinary requests cost what they cost before a change. Two
runs hours apart on a shared machine cannot show a few percent, so both
versions are measured in the same run, each scenario on one version then
on the other, seconds apart:

1. the revision is extracted with ``git archive`` into the run's temporary
   folder and installed in a venv of its own (``pip install``, as its
   setup.cfg asks); the current mapapi is the one this interpreter imports;
2. each version gets a fresh database, its schema made by its own
   ``mapapi db upgrade``, an account and a key by its own ``mapapi accounts
   create`` and ``keys create``, then the same data over HTTP
   (http_data.py), with the raised rate limits of the main table;
3. the five scenarios of the main table that every version answers alike
   are driven by wrk as there, the two servers alternated per scenario,
   the baseline first in odd runs and the current first in even ones.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .answers import fetch
from .baseline_report import COMPARED, compared_rows, targets
from .data import database_for
from .http_data import seed_over_http
from .load import measure_scenario, write_request_file
from .report import code_description
from .scenarios import Scenario, build_scenarios
from .servers import (
    Processes,
    Server,
    mapapi_command,
    server_environment,
    start_app_server,
    stop_server,
)
from .settings import HERE, progress

ACCOUNT = "bench@example.com"


@dataclass
class Version:
    name: str  # "baseline" or "current"
    mapapi: list[str]  # the command that runs its ``mapapi``
    description: str


@dataclass
class Side:
    """One version serving its own seeded database."""

    version: Version
    server: Server
    scenarios: dict[str, Scenario]
    request_files: dict[str, Path]


def comparison_seconds(options, backends: int) -> int:
    """The comparison's share of the load phase, for the time estimate."""
    return backends * options.runs * len(COMPARED) * 2 * (options.duration + options.warmup)


def compare_versions(options, backends, wrk, workdir: Path, processes: Processes) -> dict:
    """Build the baseline, then compare it with the current mapapi on each database."""
    versions = [build_baseline(options.baseline, workdir), current_version()]
    results = []
    for backend in backends:
        with contextlib.ExitStack() as stack:
            sides = [
                stack.enter_context(serving(version, backend, workdir, processes))
                for version in versions
            ]
            runs = load_both(wrk, options, sides, processes, backend)
        labels = {key: scenario.label for key, scenario in sides[0].scenarios.items()}
        rows = compared_rows(runs, labels)
        results.append(
            {"backend": backend, "rows": rows, "targets": targets(rows), "runs": runs}
        )
    return {
        "revision": options.baseline,
        "versions": {version.name: version.description for version in versions},
        "results": results,
    }


def build_baseline(revision: str, workdir: Path, name: str = "baseline") -> Version:
    """``git archive REV`` into the run's folder, and a venv with it installed
    (``name``: the version's, and its folder's)."""
    folder = workdir / name
    source, venv = folder / "source", folder / "venv"
    commit = extract_revision(revision, source)
    progress(f"{name}: installing {revision} ({commit[:12]}) in a venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"{source}[postgres]"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        raise SystemExit(f"installing {revision} failed:\n{installed.stderr[-3000:]}")
    check_imports_its_own(venv, folder)
    return Version(name, [str(venv / "bin" / "mapapi")], f"{revision} (commit {commit})")


def extract_revision(revision: str, source: Path) -> str:
    """The files of git revision ``revision`` in the folder ``source`` (made); its commit."""
    repository = str(HERE.parent)
    found = subprocess.run(
        ["git", "-C", repository, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if found.returncode != 0:
        raise SystemExit(f"{revision}: no such commit in {repository}")
    commit = found.stdout.strip()
    source.mkdir(parents=True)
    archive = source.parent / f"{source.name}.tar"
    subprocess.run(["git", "-C", repository, "archive", "-o", str(archive), commit], check=True)
    subprocess.run(["tar", "-x", "-f", str(archive), "-C", str(source)], check=True)
    return commit


def check_imports_its_own(venv: Path, folder: Path) -> None:
    """Stop if the baseline's interpreter would import another mapapi (a PYTHONPATH, say)."""
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import mapapi; print(mapapi.__file__)"],
        cwd=folder, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(venv.resolve()):
        raise SystemExit(f"the baseline's venv imports mapapi from {where}, not its own install")


def current_version() -> Version:
    return Version("current", mapapi_command(), code_description())


@contextlib.contextmanager
def serving(version: Version, backend: str, workdir: Path, processes: Processes):
    """The version on a fresh database: its schema, account and key, serving, seeded."""
    folder = workdir / f"{backend}-{version.name}"
    folder.mkdir()
    with database_for(backend, folder) as url:
        environment = server_environment(url, folder)
        progress(f"{backend} {version.name}: schema, account and key through its own mapapi")
        run_mapapi(version, ["db", "upgrade"], environment, folder)
        run_mapapi(version, ["accounts", "create", ACCOUNT, "--plan", "pro"], environment, folder)
        created = run_mapapi(
            version, ["keys", "create", ACCOUNT, "--name", "benchmark"], environment, folder
        )
        secret = created.split()[-1]
        server = start_app_server(processes, url, folder, version.name, mapapi=version.mapapi)
        try:
            progress(f"{backend} {version.name}: seeding over HTTP")
            seeded = seed_over_http(server.base_url, secret)
            everything = {scenario.key: scenario for scenario in build_scenarios(seeded)}
            scenarios = {key: everything[key] for key in COMPARED}
            check_answers(server, scenarios.values(), f"{backend} {version.name}")
            files = {key: write_request_file(s, folder) for key, s in scenarios.items()}
            yield Side(version, server, scenarios, files)
        finally:
            stop_server(processes, server)


def run_mapapi(version: Version, arguments: list[str], environment: dict, folder: Path) -> str:
    """One ``mapapi`` command of the version; its standard output."""
    done = subprocess.run(
        version.mapapi + arguments, env=environment, cwd=folder,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(
            f"{version.name}: mapapi {' '.join(arguments)} failed ({done.returncode}):\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.stdout


def check_answers(server: Server, scenarios, tag: str) -> None:
    """Each scenario's first request answers its expected status before any load."""
    for scenario in scenarios:
        status, _headers, body = fetch(server, scenario)
        if status != scenario.expected_status:
            raise SystemExit(
                f"{tag}: {scenario.label} answered {status}, not {scenario.expected_status}: "
                f"{body[:400]!r}"
            )


def load_both(wrk, options, sides: list[Side], processes, backend) -> list[dict]:
    """Per run, {version: {scenario: Measurement}}; the versions alternate per scenario."""
    runs = []
    for run in range(1, options.runs + 1):
        order = sides if run % 2 else sides[::-1]
        measured = {side.version.name: {} for side in sides}
        for key in COMPARED:
            for side in order:
                measured[side.version.name][key] = measure_scenario(
                    wrk, options, side.scenarios[key], side.server, side.request_files[key],
                    (options.warmup, options.duration), processes,
                    f"{backend} {side.version.name} run {run}/{options.runs}",
                )  # fmt: skip
        runs.append(measured)
    return runs
