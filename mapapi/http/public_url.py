"""The service's address as its clients see it: the base of the absolute URLs it writes."""

from flask import current_app, request


def base_url() -> str:
    """``MAPAPI_PUBLIC_URL`` when set, else this request's scheme and host
    (as a trusted proxy forwarded them, with ``MAPAPI_TRUSTED_PROXIES``),
    with no trailing slash."""
    return current_app.config["PUBLIC_URL"] or request.host_url.rstrip("/")
