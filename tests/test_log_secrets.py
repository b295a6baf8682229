"""No key secret in any log record, an access line per request, and request ids that are safe.

All log output is captured (the root logger at DEBUG, which turns on
SQLAlchemy's statement and parameter logging too, plus any logger that does
not propagate) while keys are created by the API, the factories and the
``mapapi`` command, used, listed and revoked, and refused.
"""

import json
import logging
import re
import secrets
import socket
import traceback
from datetime import timedelta

import pytest

from mapapi.timeutil import utcnow

from .factories import create_key

API = "/api/v1"
OWNER = "owner@example.com"
GENERATED_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
ACCESS_FIELDS = {"method", "path", "status", "duration_ms", "request_id", "account_id"}


@pytest.fixture
def all_logs(caplog):
    """caplog at DEBUG everywhere, including loggers that do not propagate to the root.

    Loggers with a level of their own are lowered too: SQLAlchemy sets its own
    to WARN, and at DEBUG it logs every statement with its parameters.
    """
    caplog.set_level(logging.DEBUG)
    for name in ["mapapi.access", "sqlalchemy", *logging.root.manager.loggerDict]:
        logger = logging.getLogger(name)
        if logger.level > logging.DEBUG or name in ("mapapi.access", "sqlalchemy"):
            caplog.set_level(logging.DEBUG, logger=name)
    detached = [
        logger
        for logger in logging.root.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.propagate
    ]
    for logger in detached:
        logger.addHandler(caplog.handler)
    yield caplog
    for logger in detached:
        logger.removeHandler(caplog.handler)


def everything_logged(caplog) -> list[str]:
    """Each record's message, raw msg and args, exception and stack text, and attributes."""
    texts = [caplog.text]
    for record in caplog.records:
        texts += [record.getMessage(), repr(record.msg), repr(record.args), repr(vars(record))]
        if record.exc_info:
            texts.append("".join(traceback.format_exception(*record.exc_info)))
        texts += [record.exc_text or "", record.stack_info or ""]
    return texts


def assert_never_logged(caplog, values) -> None:
    texts = everything_logged(caplog)
    for value in values:
        assert value, "an empty value would match anything"
        leaked = [text[:300] for text in texts if value in text]
        assert not leaked, (value, leaked)


def access_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "mapapi.access"]


class Recorder:
    """Sends requests with a given secret, remembering each for the access-log check."""

    def __init__(self, client):
        self.client = client
        self.sent = []  # (method, path, response, account id or None)

    def call(self, method, path, secret=None, *, header=None, account=None, **kwargs):
        headers = {}
        if header is not None:
            headers["Authorization"] = header
        elif secret is not None:
            headers["Authorization"] = f"Bearer {secret}"
        response = self.client.open(API + path, method=method, headers=headers, **kwargs)
        self.sent.append((method, (API + path).split("?")[0], response, account))
        return response


def test_no_secret_or_authorization_header_is_ever_logged_while_keys_live_and_die(
    app, client, runner, account, key, all_logs, monkeypatch
):
    api = Recorder(client)
    secrets_seen = [key]

    # Created: by the factories, the API (both scopes) and the operator's command.
    expired = create_key(app, OWNER, expires_at=utcnow() - timedelta(minutes=1), name="expired")
    secrets_seen.append(expired)
    created = {}
    for scope in ("READ_WRITE", "READ_ONLY"):
        response = api.call(
            "POST", "/keys", key, account=account, json={"name": scope, "scope": scope}
        )
        assert response.status_code == 201, response.get_json()
        created[scope] = response.get_json()["data"]
        secrets_seen.append(created[scope]["key"])
    result = runner.invoke(args=["keys", "create", OWNER, "--name", "from the command"])
    assert result.exit_code == 0, result.output
    from_command = result.stdout.strip()
    assert from_command.startswith("mk_live_")
    secrets_seen.append(from_command)
    writer, reader = created["READ_WRITE"]["key"], created["READ_ONLY"]["key"]

    # Used, with every form of the header the contract accepts, and listed.
    for header in (f"Bearer {writer}", f"bearer {writer}", f"BEARER   {writer}  "):
        assert api.call("GET", "/maps?page=1", header=header, account=account).status_code == 200
    map_id = api.call(
        "POST", "/maps", writer, account=account, json={"title": "Logged"}
    ).get_json()["data"]["id"]
    assert api.call("GET", f"/maps/{map_id}", from_command, account=account).status_code == 200
    assert (
        api.call("POST", "/maps", reader, account=account, json={"title": "x"}).status_code == 403
    )
    listed = api.call("GET", "/keys", writer, account=account)
    assert listed.status_code == 200
    assert not [s for s in secrets_seen if s in listed.get_data(as_text=True)]

    # Refused: unknown, malformed, expired, and revoked secrets.
    wrong = "mk_live_" + secrets.token_urlsafe(32)
    secrets_seen.append(wrong)
    refusals = {
        f"Bearer {wrong}": "INVALID_API_KEY",
        f"Bearer {key}x": "INVALID_API_KEY",
        f"Basic {key}": "INVALID_API_KEY",
        f"Token {wrong}": "INVALID_API_KEY",
        f"Bearer {expired}": "API_KEY_EXPIRED",
    }
    for header, code in refusals.items():
        response = api.call("GET", "/maps", header=header)
        assert response.status_code == 401 and response.get_json()["error"]["code"] == code, header

    # Revoked: by another key, by itself, and by the command; then refused.
    assert (
        api.call(
            "DELETE", f"/keys/{created['READ_ONLY']['id']}", writer, account=account
        ).status_code
        == 200
    )
    assert (
        api.call(
            "DELETE", f"/keys/{created['READ_WRITE']['id']}", writer, account=account
        ).status_code
        == 200
    )
    command_key_id = [
        k
        for k in api.call("GET", "/keys", key, account=account).get_json()["data"]["keys"]
        if k["name"] == "from the command"
    ][0]["id"]
    result = runner.invoke(args=["keys", "revoke", command_key_id])
    assert result.exit_code == 0, result.output
    for revoked in (reader, writer, from_command):
        response = api.call("GET", "/maps", revoked)
        assert (
            response.status_code == 401
            and response.get_json()["error"]["code"] == "INVALID_API_KEY"
        )

    # An unexpected failure while a key is in use is logged with its traceback.
    def fail(_title):
        raise RuntimeError("unexpected failure in a view")

    monkeypatch.setattr("mapapi.services.maps.slug_for", fail)
    response = api.call("POST", "/maps", key, account=account, json={"title": "boom"})
    assert response.status_code == 500
    assert any(r.exc_info for r in all_logs.records), "the failure was logged with its traceback"

    assert any(r.name.startswith("sqlalchemy.engine") for r in all_logs.records), "SQL was logged"
    assert any(r.name == "mapapi.http.errors" for r in all_logs.records)
    headers = [f"Bearer {s}" for s in secrets_seen] + [h for h in refusals]
    assert_never_logged(all_logs, secrets_seen + headers)
    for secret in secrets_seen:  # no log shows more of a secret than its 12-character prefix
        assert_never_logged(all_logs, [secret[:13], secret[-20:]])

    # One structured access line per request, in order, with what it must hold.
    lines = access_lines(all_logs)
    assert len(lines) == len(api.sent)
    for line, (method, path, response, account_id) in zip(lines, api.sent, strict=True):
        assert ACCESS_FIELDS <= set(line), line
        assert (line["method"], line["path"], line["status"]) == (
            method,
            path,
            response.status_code,
        )
        assert line["request_id"] == response.headers["X-Request-Id"]
        assert line["account_id"] == account_id, line
        assert isinstance(line["duration_ms"], (int, float)) and line["duration_ms"] >= 0


def test_a_refused_request_with_a_secret_in_the_query_string_does_not_log_it(client, all_logs):
    secret = "mk_live_" + secrets.token_urlsafe(32)
    response = client.get(f"{API}/maps?api_key={secret}&token={secret}")
    assert response.status_code == 401
    (line,) = access_lines(all_logs)
    assert line["path"] == f"{API}/maps" and line["account_id"] is None
    assert_never_logged(all_logs, [secret])


# --- X-Request-Id --------------------------------------------------------------------

#: Values the test client can send as a header.
UNSAFE_VIA_HEADER = {
    "control-1": "abc\x01def",
    "delete": "abc\x7f",
    "nul": "abc\x00",
    "tab": "abc\tdef",
    "inner-space": "abc def",
    "leading-space": " abc",
    "unicode": "réquest-ü",
    "129-chars": "a" * 129,
    "quote": 'a"b',
    "json-injection": 'x","account_id":"forged',
}
#: CR and LF: werkzeug's test client refuses them in a header, so they are put
#: into the WSGI environ directly, as a server that let them through would.
UNSAFE_VIA_ENVIRON = {
    "crlf": "abc\r\ndef",
    "cr": "abc\rdef",
    "lf": "abc\ndef",
    "header-injection": "abc\r\nSet-Cookie: session=forged",
    "only-crlf": "\r\n",
}


def request_with_id(client, secret, value, via_environ):
    kwargs = {"headers": {"Authorization": f"Bearer {secret}"}}
    if via_environ:
        kwargs["environ_base"] = {"HTTP_X_REQUEST_ID": value}
    else:
        kwargs["headers"]["X-Request-Id"] = value
    return client.get(f"{API}/maps", **kwargs)


@pytest.mark.parametrize(
    "value, via_environ",
    [(v, False) for v in UNSAFE_VIA_HEADER.values()]
    + [(v, True) for v in UNSAFE_VIA_ENVIRON.values()],
    ids=list(UNSAFE_VIA_HEADER) + list(UNSAFE_VIA_ENVIRON),
)
def test_an_unsafe_request_id_is_replaced_and_never_echoed_nor_logged(
    client, key, all_logs, value, via_environ
):
    response = request_with_id(client, key, value, via_environ)
    assert response.status_code == 200
    generated = response.headers["X-Request-Id"]
    assert GENERATED_ID.fullmatch(generated) and generated != value
    assert "Set-Cookie" not in response.headers
    for name, header in response.headers.items():
        assert value not in header, (name, header)
    assert value not in response.get_data(as_text=True)
    (line,) = access_lines(all_logs)
    assert line["request_id"] == generated
    if value.strip():
        assert_never_logged(all_logs, [value])


def test_a_request_id_of_128_safe_characters_is_kept_and_a_generated_one_is_fresh_each_time(
    client, key
):
    safe = ("A-z.0_9:" * 16)[:128]
    assert request_with_id(client, key, safe, via_environ=False).headers["X-Request-Id"] == safe
    generated = {
        request_with_id(client, key, "a" * 129, via_environ=False).headers["X-Request-Id"]
        for _ in range(3)
    }
    assert len(generated) == 3


def raw_http(base_url: str, request: bytes) -> bytes:
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def test_a_folded_request_id_over_http_is_replaced(live_server, key):
    """An obsolete line folding (CRLF then a space) reaches the app unfolded, and is replaced."""
    answer = raw_http(
        live_server,
        b"GET /api/v1/maps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        + f"Authorization: Bearer {key}\r\n".encode()
        + b"X-Request-Id: abc\r\n def\r\n\r\n",
    )
    head = answer.split(b"\r\n\r\n")[0].decode("latin-1")
    assert head.startswith("HTTP/1.1 200"), head
    (request_id,) = re.findall(r"(?im)^x-request-id: (.*)$", head)
    assert GENERATED_ID.fullmatch(request_id) and "abc" not in request_id


@pytest.mark.xfail(
    strict=True,
    reason="waitress answers a header line holding a bare CR with its own text/plain 400 "
    "that quotes the line; the app never sees the request (reported)",
)
def test_a_request_id_with_a_bare_cr_over_http_is_not_echoed_anywhere(live_server, key):
    marker = "abc\rINJECTED"
    answer = raw_http(
        live_server,
        b"GET /api/v1/maps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        + f"Authorization: Bearer {key}\r\nX-Request-Id: {marker}\r\n\r\n".encode(),
    )
    assert b"INJECTED" not in answer, answer
