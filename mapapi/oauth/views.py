"""OAuth's doors: the two metadata documents, registration, the approval
page and the token endpoint. The protocol is Authlib's (``server``); this
module holds the page, and the rules around it: OAuth refused where it is
not offered (``discovery``), registrations limited per address, the form's
one-time token, CORS for browser-based clients.
"""

import hashlib
import math
import secrets
import time
from datetime import timedelta
from urllib.parse import urlsplit

from authlib.oauth2 import OAuth2Error
from flask import Blueprint, current_app, jsonify, make_response, render_template, request
from limits import parse
from sqlalchemy import delete

from ..extensions import db
from ..http import auth
from ..http.errors import APIError, not_found
from ..timeutil import utcnow
from . import discovery
from .documents import DocumentRefused, client_from_document, is_document_id
from .server import Approval, build_server
from .storage import READ, SCOPES, WRITE, OAuthFormToken

bp = Blueprint("oauth", __name__, template_folder="templates")

#: At most this many registrations an hour from one address, refused ones included.
REGISTRATIONS = parse("20 per hour")
FORM_SECONDS = 600
BROWSER_COOKIE = "mapapi_oauth_browser"
#: The page's CSP: nothing runs, nothing loads, nothing frames it. No
#: ``form-action``: the approval's redirect to the client must not be stopped.
PAGE_POLICY = "default-src 'none'; style-src 'self'; base-uri 'none'; frame-ancestors 'none'"
#: The endpoints browser-based clients call from any origin, without credentials.
OPEN_TO_ANY_ORIGIN = {"oauth.protected_resource", "oauth.authorization_server", "oauth.register", "oauth.token"}
CORS_ALLOW_HEADERS = "Authorization, Content-Type, MCP-Protocol-Version, X-Request-Id"


def init_app(app) -> None:
    app.extensions["mapapi.oauth"] = build_server(app)
    app.register_blueprint(bp)


def _server():
    return current_app.extensions["mapapi.oauth"]


def _base() -> str:
    """The base of OAuth's URLs, or the API's 404 where OAuth is not offered."""
    base = discovery.oauth_base()
    if base is None:
        raise not_found()
    return base


@bp.before_request
def _preflight():
    """A browser's preflight to an endpoint open to any origin: 204, no credentials."""
    if request.method == "OPTIONS":
        _base()
        answer = current_app.response_class(status=204)
        del answer.headers["Content-Type"]
        methods = sorted(request.url_rule.methods - {"OPTIONS", "HEAD"})
        answer.headers["Access-Control-Allow-Methods"] = ", ".join(methods)
        answer.headers["Access-Control-Allow-Headers"] = CORS_ALLOW_HEADERS
        answer.headers["Access-Control-Max-Age"] = "7200"
        return answer
    return None


@bp.after_request
def _open_to_browsers(response):
    """CORS from any origin for the metadata, registration and the token endpoint."""
    if request.endpoint in OPEN_TO_ANY_ORIGIN and "Origin" in request.headers:
        response.headers["Access-Control-Allow-Origin"] = "*"
    return response


@bp.route(discovery.PROTECTED_RESOURCE_PATH, methods=["GET", "OPTIONS"], endpoint="protected_resource")
def protected_resource():
    """The protected resource metadata of ``/mcp`` (RFC 9728)."""
    return jsonify(discovery.protected_resource(_base()))


@bp.route(discovery.AUTHORIZATION_SERVER_PATH, methods=["GET", "OPTIONS"], endpoint="authorization_server")
def authorization_server():
    """The authorization server's metadata (RFC 8414)."""
    return jsonify(discovery.authorization_server(_base()))


@bp.route("/oauth/register", methods=["POST", "OPTIONS"], endpoint="register")
def register():
    """Register a public client (RFC 7591)."""
    _base()
    retry = _count_registration()
    if retry is not None:
        answer = _oauth_error(429, "too_many_requests", "At most 20 registrations an hour from one address.")
        answer.headers["Retry-After"] = str(retry)
        return answer
    sent = request.get_json(silent=True) if request.mimetype == "application/json" else None
    if not isinstance(sent, dict):
        return _oauth_error(400, "invalid_client_metadata", "The body must be a JSON object (application/json).")
    return _server().create_endpoint_response("client_registration")


def _count_registration() -> int | None:
    """Count this registration against its address; the seconds to wait when over."""
    buckets = current_app.extensions["mapapi.buckets"]
    identity = f"address:{request.remote_addr}"
    if buckets.limiter.call("hit", REGISTRATIONS, buckets.prefix, identity, "oauth-registration"):
        return None
    reset, _ = buckets.limiter.call("get_window_stats", REGISTRATIONS, buckets.prefix, identity, "oauth-registration")
    return max(1, math.ceil(reset - time.time()))


def _oauth_error(status: int, error: str, description: str):
    answer = jsonify(error=error, error_description=description)
    answer.status_code = status
    answer.headers["Cache-Control"] = "no-store"
    return answer


@bp.route("/oauth/token", methods=["POST", "OPTIONS"], endpoint="token")
def token():
    """Exchange a code (with its PKCE verifier) or a refresh token for tokens."""
    _base()
    return _server().create_token_response()


@bp.get("/oauth/authorize")
def authorize_page():
    """The approval page: who asks, where the answer goes, what access."""
    _base()
    problem, grant = _checked_request()
    if problem is not None:
        return _page(problem=problem, status=400)
    return _form(grant)


@bp.post("/oauth/authorize")
def authorize_decision():
    """The person's decision: approve with a key and a scope, or deny."""
    _base()
    if not _take_form_token():
        return _page(
            problem="This form was already used, has expired, or was not sent from this page. "
            "Start again from the assistant.",
            status=403,
        )
    problem, grant = _checked_request()
    if problem is not None:
        return _page(problem=problem, status=400)
    server = _server()
    if request.form.get("decision") != "approve":
        return server.create_authorization_response(grant=grant, grant_user=None)
    try:
        holder, key_scope = auth.key_holder(request.form.get("api_key", ""))
    except APIError as refused:
        return _form(grant, problem=refused.message, status=400)
    access = request.form.get("access")
    if access not in ("read", "write"):
        return _form(grant, problem="Choose read, or read and write.", status=400)
    if access == "write" and key_scope != "READ_WRITE":
        return _form(grant, problem="This key is read-only: it can grant read access only.", status=400)
    scope = READ if access == "read" else f"{READ} {WRITE}"
    return server.create_authorization_response(grant=grant, grant_user=Approval(holder.id, scope))


def _checked_request():
    """(a problem to show, None) or (None, Authlib's grant for this authorization request)."""
    args = request.args
    for name in ("client_id", "redirect_uri", "response_type", "code_challenge", "state", "scope", "resource"):
        if len(args.getlist(name)) > 1:
            return f"The request names {name} more than once.", None
    client_id = args.get("client_id", "")
    if not client_id:
        return "The request names no client (client_id).", None
    if is_document_id(client_id):
        try:
            client_from_document(client_id)
        except DocumentRefused as refused:
            return str(refused), None
    resource = args.get("resource")
    if resource is not None and resource != _base() + "/mcp":
        return f"This service can grant access to {_base()}/mcp only.", None
    try:
        grant = _server().get_consent_grant(end_user=None)
    except OAuth2Error as error:
        return _describe(error), None
    return None, grant


def _describe(error: OAuth2Error) -> str:
    if error.error == "invalid_client":
        return "This client is not known here: it may have been forgotten. Connect it again from the assistant."
    description = error.description or error.error
    return f"The assistant's request cannot be approved: {description}"


def _form(grant, problem: str | None = None, status: int = 200):
    """The approval form, with a one-time token bound to this browser and this request."""
    browser = request.cookies.get(BROWSER_COOKIE, "")
    new_browser = len(browser) != 43
    if new_browser:
        browser = secrets.token_urlsafe(32)
    form_token = secrets.token_urlsafe(32)
    now = utcnow()
    db.session.execute(delete(OAuthFormToken).where(OAuthFormToken.expires_at < now))
    db.session.add(
        OAuthFormToken(
            token_hash=_digest(form_token),
            browser_hash=_digest(browser),
            request_hash=_digest(request.query_string.decode("latin-1")),
            expires_at=now + timedelta(seconds=FORM_SECONDS),
        )
    )
    db.session.commit()
    oauth_request = grant.request
    client = oauth_request.client
    redirect_uri = oauth_request.payload.redirect_uri or client.get_default_redirect_uri()
    asked = (oauth_request.payload.scope or "").split()
    answer = _page(
        status=status,
        problem=problem,
        client_name=client.row.name,
        client_id=client.row.client_id,
        redirect_host=urlsplit(redirect_uri).netloc,
        asks_write=WRITE in asked or not set(asked) & set(SCOPES),
        form_token=form_token,
    )
    if new_browser:
        answer.set_cookie(
            BROWSER_COOKIE, browser, max_age=FORM_SECONDS, path="/oauth/authorize",
            secure=request.scheme == "https", httponly=True, samesite="Strict",
        )  # fmt: skip
    return answer


def _take_form_token() -> bool:
    """Whether the POST carries a live form token of this browser and request; used up now."""
    form_token = request.form.get("form_token", "")
    browser = request.cookies.get(BROWSER_COOKIE, "")
    if not form_token or not browser:
        return False
    taken = db.session.execute(
        delete(OAuthFormToken).where(
            OAuthFormToken.token_hash == _digest(form_token),
            OAuthFormToken.browser_hash == _digest(browser),
            OAuthFormToken.request_hash == _digest(request.query_string.decode("latin-1")),
            OAuthFormToken.expires_at > utcnow(),
        )
    ).rowcount
    db.session.commit()
    return taken == 1


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _page(status: int = 200, **values):
    answer = make_response(render_template("oauth_authorize.html", **values), status)
    answer.headers["Content-Security-Policy"] = PAGE_POLICY
    answer.headers["X-Frame-Options"] = "DENY"
    answer.headers["Cache-Control"] = "no-store"
    answer.headers["Referrer-Policy"] = "no-referrer"
    answer.headers["X-Content-Type-Options"] = "nosniff"
    return answer
