#!/usr/bin/env python3
"""Where a request's time goes, step by step (cProfile, in-process).

Seeds the benchmark's data (``harness/data.py``), then, for the page of 100
locations with their layers and tags, ``GET /maps/:id`` and the bad key,
calls the WSGI app (the whole pipeline) directly over ``--requests``
requests under cProfile and prints, per step of the pipeline and of the
request hooks, per view, SQL and serialisation, its inclusive time per
request and its share of the request (``harness/steps.py``).

Usage: ``python benchmarks/profile_steps.py [--requests 2000] [--postgresql]``;
to profile an earlier version, put its source first on ``PYTHONPATH``
(``git archive REV mapapi | tar -x -C /tmp/old && PYTHONPATH=/tmp/old ...``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

from harness.data import database_for, make_app, seed_database
from harness.report import code_description, load_average
from harness.scenarios import build_scenarios
from harness.steps import print_steps, profile_steps

PROFILED = ("list_100", "get_map", "bad_key")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests profiled (2000)")
    parser.add_argument(
        "--postgresql", action="store_true", help="on a scratch database of MAPAPI_DATABASE_URL"
    )
    options = parser.parse_args(argv)
    backend = "postgresql" if options.postgresql else "sqlite"
    if options.postgresql and not os.environ.get("MAPAPI_DATABASE_URL", "").startswith("postgresql"):
        parser.error("--postgresql needs MAPAPI_DATABASE_URL=postgresql+psycopg://...")
    with tempfile.TemporaryDirectory(prefix="mapapi-steps-") as folder:
        access = logging.getLogger("mapapi.access")  # on, to a file, as mapapi serve has it
        access.setLevel(logging.INFO)
        access.addHandler(logging.FileHandler(Path(folder) / "access.log"))
        access.propagate = False
        with database_for(backend, Path(folder)) as url:
            scenarios = {s.key: s for s in build_scenarios(seed_database(url))}
            app = make_app(url)
            print(f"code: {code_description()}; {backend}; load average {load_average()}")
            for key in PROFILED:
                rows = profile_steps(app, scenarios[key], options.requests)
                print_steps(f"{scenarios[key].label}: {options.requests} requests", rows)
            with app.app_context():
                from mapapi.extensions import db

                db.engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
