"""``--profile``: where an in-process request spends its time (pyinstrument)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from .data import make_app
from .scenarios import Scenario, headers_to_send

#: The hot paths --profile runs, reads then writes; a bulk counts as one request.
PROFILED = ("get_map", "bad_key", "list_100", "create", "bulk")


def profile_endpoints(database_url: str, scenarios: list[Scenario], requests: int, workdir: Path):
    """pyinstrument over ``requests`` in-process requests of each hot path.

    The WSGI app is called directly with prebuilt environs, so the profile
    holds the app's own work (hooks, views, SQL, JSON), not a test client's.
    The access log is switched on, writing to a file, as ``mapapi serve``
    means it to be. Before profiling, the same requests are timed without
    the profiler: thread CPU time is the cost that other processes on a
    shared machine cannot inflate.
    """
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise SystemExit("--profile needs pyinstrument: pip install pyinstrument") from None

    access = logging.getLogger("mapapi.access")
    access.setLevel(logging.INFO)
    access.addHandler(logging.FileHandler(workdir / "profile-access.log"))
    access.propagate = False
    app = make_app(database_url)
    by_key = {s.key: s for s in scenarios}
    for key in PROFILED:
        scenario = by_key[key]
        for prepared in wsgi_environs(scenario, 50):
            call_wsgi(app, prepared, scenario.expected_status)
        batch = wsgi_environs(scenario, requests)
        wall, cpu = time.perf_counter(), time.thread_time()
        for prepared in batch:
            call_wsgi(app, prepared, scenario.expected_status)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        batch = wsgi_environs(scenario, requests)
        profiler = Profiler(interval=0.0002)
        profiler.start()
        for prepared in batch:
            call_wsgi(app, prepared, scenario.expected_status)
        profiler.stop()
        print(
            f"\n=== profile: {scenario.label}: {requests} requests in-process; without the "
            f"profiler {cpu / requests * 1e6:.0f} µs CPU ({wall / requests * 1e6:.0f} µs wall) "
            "per request ==="
        )
        print_profile_summary(profiler.last_session.root_frame())
        # mapapi's frames stay visible even where it is installed in site-packages.
        print(
            profiler.output_text(
                unicode=True,
                color=False,
                time="percent_of_total",
                processor_options={"show_regex": r".*/mapapi/.*"},
            )
        )


def wsgi_environs(scenario: Scenario, count: int) -> list[dict]:
    """Fresh WSGI environs of the scenario's first request, built before timing starts."""
    from werkzeug.test import EnvironBuilder

    request = scenario.requests[0]
    return [
        EnvironBuilder(
            path=request.path,
            method=request.method,
            headers=headers_to_send(scenario),
            data=request.body,
        ).get_environ()
        for _ in range(count)
    ]


def call_wsgi(app, environ, expected_status: int) -> None:
    statuses = []
    body = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        b"".join(body)
    finally:
        if hasattr(body, "close"):
            body.close()
    if not statuses or not statuses[0].startswith(f"{expected_status} "):
        raise SystemExit(f"profiled request answered {statuses}")


def frame_place(frame) -> tuple[str, str]:
    """(owner, file) of a frame: a library and its subpackage, or a mapapi module."""
    path = (frame.file_path or "").replace("\\", "/")
    # Libraries first: a venv may itself live in a folder named mapapi.
    if "site-packages/" in path and "site-packages/mapapi/" not in path:
        inside = path.split("site-packages/", 1)[1]
        parts = inside.split("/")
        owner = ".".join(parts[:2]) if len(parts) > 2 else parts[0]
        return owner.removesuffix(".py"), inside
    if "/mapapi/" in path:
        inside = "mapapi/" + path.rsplit("/mapapi/", 1)[1]
        return inside.removesuffix(".py").replace("/", "."), inside
    if not path or path.startswith("<"):
        return "built-in (C)", path or "<built-in>"
    return "stdlib " + Path(path).stem, Path(path).name


#: Library functions whose inclusive time says where a request's time goes.
LANDMARKS = {
    "sqlalchemy/engine/base.py:_execute_context": "SQLAlchemy: execute (driver included)",
    "<built-in>:Cursor.execute": "sqlite3 driver: execute",
    "<built-in>:Cursor.fetchall": "sqlite3 driver: fetch rows",
    "sqlalchemy/orm/loading.py:instances": "SQLAlchemy ORM: rows into objects (selectin included)",
    "sqlalchemy/orm/strategies.py:_load_for_path": "SQLAlchemy ORM: selectinload of a relation",
    "marshmallow/schema.py:dump": "marshmallow: dump the output schema",
    "mapapi/contract/jsonprovider.py:response": "JSON encoding of the response (jsonify, orjson)",
    "threading.py:start": "starting threads (limits' MemoryStorage expiry timer)",
}


def print_profile_summary(root) -> None:
    """Self time by library, the costliest functions, and mapapi's functions inclusive."""
    total = root.time
    by_owner: dict[str, float] = {}
    by_function: dict[str, float] = {}
    inclusive: dict[str, float] = {}
    landmarks: dict[str, float] = {}

    def walk(frame, open_functions: frozenset):
        if frame.is_synthetic:  # "[self]" frames: already in their parent's self time
            return
        owner, inside = frame_place(frame)
        name = f"{inside}:{frame.function}"
        by_owner[owner] = by_owner.get(owner, 0) + frame.total_self_time
        by_function[name] = by_function.get(name, 0) + frame.total_self_time
        if name not in open_functions:
            if inside.startswith("mapapi/"):
                inclusive[name] = inclusive.get(name, 0) + frame.time
            if name in LANDMARKS:
                landmarks[LANDMARKS[name]] = landmarks.get(LANDMARKS[name], 0) + frame.time
            open_functions = open_functions | {name}
        for child in frame.children:
            walk(child, open_functions)

    walk(root, frozenset())

    def show(title, table, count):
        print(title)
        for name, seconds in sorted(table.items(), key=lambda item: -item[1])[:count]:
            print(f"  {100 * seconds / total:5.1f}%  {name}")

    show("self time by library (subpackage) or mapapi module:", by_owner, 18)
    show("self time by function, top 20:", by_function, 20)
    show("inclusive time of mapapi's functions, top 20:", inclusive, 20)
    show("inclusive time of library landmarks:", landmarks, len(LANDMARKS))


