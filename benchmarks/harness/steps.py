"""Where one request's time goes, step by step: cProfile over many
in-process requests, each step's inclusive time per request and its share.

A step is a function every request may pass (a pipeline step, a hook's
step, the view, the serialisation); its figure is cProfile's cumulative
time of that function over the requests, divided by their number, so a
step that returns at once where it does not apply shows as next to
nothing. cProfile adds its own cost to every call it sees: the shares are
of the profiled time, and the CPU per request without the profiler is
printed beside them.
"""

from __future__ import annotations

import cProfile
import pstats
import time

from .profiling import call_wsgi, wsgi_environs

#: (label, module path ending, function name), in the order a request passes them.
STEPS = (
    ("pipeline: all of it (the request)", "mapapi/http/pipeline.py", "__call__"),
    ("pipeline: request id", "mapapi/http/headers.py", "request_id_for"),
    ("pipeline: gzip", "mapapi/http/compression.py", "gzip_answer"),
    ("pipeline: metrics", "mapapi/http/request_metrics.py", "count"),
    ("pipeline: access log", "mapapi/http/access_log.py", "write_line"),
    ("/mcp front (pass-through)", "mapapi/mcp/front.py", "__call__"),
    ("Flask: wsgi_app (context, dispatch)", "flask/app.py", "wsgi_app"),
    ("hook: before_request", "mapapi/http/hooks.py", "before_request"),
    ("  auth.identify (key lookup)", "mapapi/http/auth.py", "identify"),
    ("  general rate limit", "mapapi/http/ratelimit.py", "check_general_limit"),
    ("  CORS preflight", "mapapi/http/cors.py", "preflight_response"),
    ("  auth.refusal", "mapapi/http/auth.py", "refusal"),
    ("  idempotency: seen before", "mapapi/http/idempotency.py", "seen_before"),
    ("  route rate limit", "mapapi/http/ratelimit.py", "check_route_limit"),
    ("  body size", "mapapi/http/payload.py", "check_body_size"),
    ("  If-Match precondition", "mapapi/http/etags.py", "check_precondition_before_view"),
    ("  idempotency: key format", "mapapi/http/idempotency.py", "check_key_format"),
    ("view", "mapapi/api/", ""),
    ("  SQL (SQLAlchemy execute, driver included)", "sqlalchemy/engine/base.py", "_execute_context"),
    ("  serialisation: respond/jsonify (orjson)", "mapapi/contract/jsonprovider.py", "response"),
    ("hook: after_request", "mapapi/http/hooks.py", "after_request"),
    ("  idempotency: finish", "mapapi/http/idempotency.py", "finish"),
    ("  ETag", "mapapi/http/etags.py", "add_etag"),
    ("  rate-limit headers", "mapapi/http/ratelimit.py", "add_rate_limit_headers"),
    ("  standard headers", "mapapi/http/headers.py", "add_standard_headers"),
    ("  CORS headers", "mapapi/http/cors.py", "add_cors_headers"),
    ("session teardown", "flask_sqlalchemy/extension.py", "_teardown_session"),
)


def profile_steps(app, scenario, requests: int) -> list[tuple[str, float, float]]:
    """``[(label, µs per request, share of the request)]`` for each step of ``STEPS``
    over ``requests`` in-process requests of ``scenario``; the first row is
    the CPU per request without the profiler."""
    for prepared in wsgi_environs(scenario, 50):  # warm: caches, connections
        call_wsgi(app, prepared, scenario.expected_status)
    batch = wsgi_environs(scenario, requests)
    cpu = time.thread_time()
    for prepared in batch:
        call_wsgi(app, prepared, scenario.expected_status)
    cpu = (time.thread_time() - cpu) / requests
    batch = wsgi_environs(scenario, requests)
    profiler = cProfile.Profile()
    profiler.enable()
    for prepared in batch:
        call_wsgi(app, prepared, scenario.expected_status)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = _cumulative(stats, *STEPS[0][1:])
    rows = [("CPU per request without the profiler", cpu * 1e6, 1.0)]
    for label, path, function in STEPS:
        seconds = _cumulative(stats, path, function)
        rows.append((label, seconds / requests * 1e6, seconds / total if total else 0.0))
    return rows


def _cumulative(stats: dict, path: str, function: str) -> float:
    """cProfile's cumulative time of the functions named ``function`` in a
    file whose path ends with ``path`` (any function of a folder ``path``
    ending in ``/`` that is called from outside it: a view)."""
    if path.endswith("/"):
        return sum(
            cumulative
            for (file, _line, _name), (_cc, _nc, _tt, cumulative, callers) in stats.items()
            if path in file.replace("\\", "/")
            and not any(path in caller[0].replace("\\", "/") for caller in callers)
        )
    return sum(
        cumulative
        for (file, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.items()
        if name == function and file.replace("\\", "/").endswith(path)
    )


def print_steps(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}\n")
    print("| step | µs/request (profiled) | share |")
    print("|---|---:|---:|")
    (label, cpu, _share), *steps = rows
    print(f"| {label} | {cpu:.0f} | |")
    for label, micros, share in steps:
        print(f"| {label} | {micros:.0f} | {100 * share:.1f}% |")
