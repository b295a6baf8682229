"""SQL statements per request, counted in-process with the app's own engine."""

from __future__ import annotations

from .data import make_app
from .scenarios import Request, Scenario, headers_to_send


def count_statements(database_url: str, scenarios: list[Scenario]) -> dict[str, dict]:
    """Statements one request of each scenario sends, after a warm-up request.

    Counted as tests/conftest.py's ``statements`` fixture counts them: every
    ``before_cursor_execute`` of the app's engine, and every statement the
    checks run on the driver (``mapapi.storage.driver``). The warm-up absorbs the
    key's ``lastUsedAt`` write (at most once a minute) and first-use costs.
    """
    from sqlalchemy import event

    from mapapi.extensions import db
    from mapapi.storage import driver

    app = make_app(database_url)
    client = app.test_client()
    seen: list[str] = []

    def record_sql(statement: str) -> None:
        seen.append(" ".join(statement.split()))

    def record(_conn, _cursor, statement, *_args):
        record_sql(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    driver.statement_listeners.append(record_sql)
    results = {}
    try:
        for scenario in scenarios:
            if scenario.server != "app":
                continue
            warm_up, counted = scenario.requests[0], scenario.requests[1 % len(scenario.requests)]
            send_in_process(client, scenario, warm_up)
            seen.clear()
            send_in_process(client, scenario, counted)
            results[scenario.key] = {"count": len(seen), "statements": list(seen)}
    finally:
        driver.statement_listeners.remove(record_sql)
        event.remove(engine, "before_cursor_execute", record)
        with app.app_context():
            db.engine.dispose()
    return results


def send_in_process(client, scenario: Scenario, request: Request):
    response = client.open(
        request.path, method=request.method, headers=headers_to_send(scenario), data=request.body
    )
    if response.status_code != scenario.expected_status:
        body = response.get_data(as_text=True)[:500]
        raise SystemExit(
            f"{scenario.label}: {request.method} {request.path} answered "
            f"{response.status_code}, not {scenario.expected_status}: {body}"
        )
    return response


