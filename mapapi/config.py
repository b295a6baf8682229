"""Every setting with its default, and where each comes from.

Precedence, lowest first: the defaults below, an optional ``instance/config.py``,
the ``MAPAPI_*`` environment variables, then the ``config`` mapping given to
``create_app`` (used by the tests).
"""

import os

from .contract.fields import document_text

MAX_BODY_BYTES = 2 * 1024 * 1024

#: Environment variable -> Flask config key.
ENVIRONMENT = {
    "MAPAPI_DATABASE_URL": "SQLALCHEMY_DATABASE_URI",
    "MAPAPI_RATELIMIT_STORAGE_URI": "RATELIMIT_STORAGE_URI",
    "MAPAPI_RATELIMIT_GENERAL": "RATELIMIT_GENERAL",
    "MAPAPI_RATELIMIT_MAP_CREATE": "RATELIMIT_MAP_CREATE",
    "MAPAPI_RATELIMIT_BULK": "RATELIMIT_BULK",
    "MAPAPI_BOOTSTRAP": "BOOTSTRAP",
    "MAPAPI_TRUSTED_PROXIES": "TRUSTED_PROXIES",
    "MAPAPI_DATABASE_POOL_SIZE": "DATABASE_POOL_SIZE",
    "MAPAPI_WEBHOOKS_ALLOW_PRIVATE": "WEBHOOKS_ALLOW_PRIVATE",
    "MAPAPI_WEBHOOKS_DELIVER": "WEBHOOKS_DELIVER",
    "MAPAPI_EVENTS_RETENTION_DAYS": "EVENTS_RETENTION_DAYS",
}


def defaults(instance_path: str) -> dict:
    """The built-in settings; the database lives in the instance folder."""
    return {
        "SQLALCHEMY_DATABASE_URI": "sqlite:///" + os.path.join(instance_path, "mapapi.sqlite3"),
        "RATELIMIT_STORAGE_URI": "memory://",
        "RATELIMIT_STRATEGY": "moving-window",
        "RATELIMIT_GENERAL": "1000 per hour",
        "RATELIMIT_MAP_CREATE": "50 per hour",
        "RATELIMIT_BULK": "20 per hour",
        "RATELIMIT_KEY_PREFIX": "mapapi",
        # Errors of the storage arrive as limits' StorageError (ratelimit.py
        # then counts in memory), and an unreachable Redis answers quickly.
        "RATELIMIT_STORAGE_OPTIONS": {
            "wrap_exceptions": True,
            "socket_connect_timeout": 1,
            "socket_timeout": 1,
        },
        # While the storage is unreachable, how often one request tries it again.
        "RATELIMIT_STORAGE_RETRY_SECONDS": 5,
        "BOOTSTRAP": "1",
        # How many reverse proxies in front of the service set X-Forwarded-*;
        # 0 trusts none, so a client cannot choose its own rate-limit address.
        "TRUSTED_PROXIES": "0",
        # Connections kept per process; waitress runs 8 threads by default.
        "DATABASE_POOL_SIZE": "8",
        # How long the change feed keeps events (GET /events).
        "EVENTS_RETENTION_DAYS": "30",
        "MAX_CONTENT_LENGTH": MAX_BODY_BYTES,
        # OPTIONS is not part of the contract: without this Flask would answer
        # it itself with an empty, non-JSON 200.
        "PROVIDE_AUTOMATIC_OPTIONS": False,
        # 1: webhook URLs may point inside the network (tests, trusted setups).
        "WEBHOOKS_ALLOW_PRIVATE": "0",
        # 0: `mapapi serve` delivers no webhooks (a `mapapi worker` does).
        "WEBHOOKS_DELIVER": "1",
        # Seconds before each retry of a failed delivery (the contract's);
        # set in the app's config only, by tests that cannot wait a day.
        "WEBHOOKS_RETRY_SCHEDULE": (5, 30, 120, 600, 3600, 21600, 86400),
        # How often an idle delivery worker looks for new events and due attempts.
        "WEBHOOKS_POLL_SECONDS": 1.0,
        # Attempts one process makes at the same time.
        "WEBHOOKS_CONCURRENCY": 8,
    }


def engine_options(database_url: str, pool_size: int) -> dict:
    """Connection pool settings: sized for the server's threads.

    A connection the database dropped (a restart) is replaced before use by
    ``database.configure_engine``. The timeouts turn an unreachable database
    into a quick 503 rather than a hung request: connecting gives up after
    3 s, a connection whose packets go unacknowledged (a lost network) is
    dropped after 10 s, and no statement runs longer than 30 s.
    """
    options = {
        "pool_size": pool_size,
        "max_overflow": pool_size,
        "pool_timeout": 5,
        "json_serializer": document_text,
    }
    if database_url.startswith("postgresql"):
        options["connect_args"] = {
            "connect_timeout": 3,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 2,
            "tcp_user_timeout": 10_000,
            "options": "-c statement_timeout=30000",
        }
    return options


def from_environment(environ=os.environ) -> dict:
    """The settings given as ``MAPAPI_*`` environment variables."""
    return {key: environ[name] for name, key in ENVIRONMENT.items() if environ.get(name)}


def is_on(value) -> bool:
    """A switch setting: 0, false, no and off (any case) are off."""
    return str(value).strip().lower() not in {"0", "false", "no", "off"}


def bootstrap_enabled(value) -> bool:
    """``MAPAPI_BOOTSTRAP=0`` (or false/no/off) turns the first-run key off."""
    return is_on(value)
