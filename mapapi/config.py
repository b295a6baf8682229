"""Every setting with its default, where each comes from, and how each is checked.

Precedence, lowest first: the defaults below, an optional ``instance/config.py``,
the ``MAPAPI_*`` environment variables, then the ``config`` mapping given to
``create_app`` (used by the tests).

Every setting is declared once: ``SETTINGS`` holds those of the app's config
(its environment variable, its Flask config key, the parser that turns the
text into the value the code reads, its default and, in words, what it
accepts); ``COMMAND_SETTINGS`` those a command reads itself (``serve``'s
address and limits, the instance folder, ``mcp``'s service and key).
Together they are every ``MAPAPI_*`` name mapapi reads.

Two checks, each one line for the operator (exit 2) through ``SettingError``:

- ``check_environment``, before a command starts (the ``mapapi`` console
  runs it before it imports anything else): every ``MAPAPI_*`` name is a
  setting, and no value carries an inline comment.
- ``check``, when the app is built: each parser accepts its value.

This module imports nothing but the standard library: the first check costs
a command almost nothing. The parsers import what they need when they run.
"""

import difflib
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

MAX_BODY_BYTES = 2 * 1024 * 1024


class SettingError(ValueError):
    """A setting whose value its parser refused: the message is one line for the operator."""


# --- parsers: text (or an already typed value) -> the value the code reads ---

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def boolean(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError


def integer(minimum: int) -> Callable[[Any], int]:
    """Decimal digits only, at least ``minimum``."""

    def parse(value) -> int:
        if isinstance(value, bool):
            raise ValueError
        if not isinstance(value, int):
            text = str(value).strip()
            if not re.fullmatch(r"[0-9]{1,9}", text):
                raise ValueError
            value = int(text)
        if value < minimum:
            raise ValueError
        return value

    return parse


#: Hours a setting may hold at most (a timedelta holds about 2.7 million years).
MAX_HOURS = 1_000_000


def hours(value) -> float:
    """A decimal number of hours above 0 (``0.01`` is 36 s), at most ``MAX_HOURS``."""
    if isinstance(value, bool):
        raise ValueError
    if not isinstance(value, (int, float)):
        text = str(value).strip()
        if not re.fullmatch(r"[0-9]{1,7}(\.[0-9]{1,9})?|\.[0-9]{1,9}", text):
            raise ValueError
        value = float(text)
    if not 0 < value <= MAX_HOURS:
        raise ValueError
    return float(value)


def rate(value) -> str:
    """A limit ``limits`` reads, of at least one request: kept as written."""
    from limits import parse as parse_rate

    text = str(value).strip()
    if parse_rate(text).amount < 1:
        raise ValueError
    return text


def database_url(value) -> str:
    """A URL SQLAlchemy can open: a known dialect whose driver is installed.

    A user name or password holding ``@`` must be percent-encoded
    (``%40``): written as it is, SQLAlchemy would read part of the password
    as the host, and show it in its errors.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    text = str(value).strip()
    if "@" in _user_info(text):
        raise SettingError(
            "MAPAPI_DATABASE_URL: the user name or password holds '@', which a URL "
            "reserves: write each @ as %40 (and, to be safe, / as %2F, # as %23, "
            ": as %3A, % as %25)."
        )
    try:
        url = make_url(text)
        dialect = url.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError):
        raise ValueError from None
    try:
        dialect.import_dbapi()
    except ImportError:
        raise SettingError(
            f"MAPAPI_DATABASE_URL: the driver of {url.drivername} is not installed "
            f"({_driver_hint(url.drivername)})."
        ) from None
    return text


def _driver_hint(drivername: str) -> str:
    if drivername.startswith("postgresql"):
        return 'install mapapi with `pip install "mapapi[postgres]"` and write postgresql+psycopg://'
    return "install its Python package, or use sqlite:/// or postgresql+psycopg://"


def rate_limit_storage(value) -> str:
    """A ``limits`` storage that keeps moving windows, with its client installed."""
    import importlib.util

    from limits.storage import SCHEMES as RATE_LIMIT_SCHEMES
    from limits.storage import MovingWindowSupport

    text = str(value).strip()
    scheme = text.partition("://")[0]
    storage = RATE_LIMIT_SCHEMES.get(scheme)
    if "://" not in text or storage is None or scheme.startswith("async+"):
        raise ValueError
    if not issubclass(storage, MovingWindowSupport):
        raise ValueError
    # Redis' storage lists both clients it can use: the scheme says which.
    needed = [name for name in storage.DEPENDENCIES if scheme.startswith(name)]
    needed = needed or list(storage.DEPENDENCIES)
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise SettingError(
            f"MAPAPI_RATELIMIT_STORAGE_URI: {scheme}:// needs the Python package "
            f"{', '.join(missing)}, which is not installed "
            '(`pip install "mapapi[redis]"` for Redis).'
        )
    return text


_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def origins(value) -> tuple[str, ...]:
    """Comma-separated ``scheme://host[:port]`` origins, or ``*`` for any; empty for none."""
    if isinstance(value, (list, tuple)):
        items = [str(item).strip() for item in value]
    else:
        items = [item.strip() for item in str(value).split(",")]
    items = [item for item in items if item]
    if items == ["*"]:
        return ("*",)
    if not all(_ORIGIN.fullmatch(item) for item in items):
        raise ValueError
    return tuple(item.lower() for item in items)


#: A tile URL as Leaflet reads it: ``{s}`` may open the host name (the
#: subdomains a, b, c); the CSP of /view names the host (mapapi.view.tiles).
_TILE_TEMPLATE = re.compile(
    r"https?://(\{s\}\.)?[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9._~!$&()*+,;=:@%/?{}-]*"
)
_TILE_PLACEHOLDER = re.compile(r"\{(s|z|x|y|-y|r)\}")


def tile_template(value) -> str:
    """``none``, or an http(s) tile URL template with ``{z}``, ``{x}`` and ``{y}`` (or ``{-y}``)."""
    text = str(value).strip()
    if text.lower() == "none":
        return "none"
    placeholders = set(_TILE_PLACEHOLDER.findall(text))
    if (
        not _TILE_TEMPLATE.fullmatch(text)
        or not {"z", "x"} <= placeholders
        or not placeholders & {"y", "-y"}
        or re.search(r"[{}]", _TILE_PLACEHOLDER.sub("", text))
    ):
        raise ValueError
    return text


#: ``scheme://host[:port]``, no path: the service's address as its clients see it.
_PUBLIC_URL = re.compile(
    r"https?://(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)


def public_url(value) -> str:
    """Empty (each request's own scheme and host), or ``scheme://host[:port]``
    with no path, query or trailing slash; kept in lower case."""
    text = str(value).strip().lower()
    if text and not _PUBLIC_URL.fullmatch(text):
        raise ValueError
    return text


def path(value) -> str:
    text = str(value).strip()
    if not text:
        raise ValueError
    return text


_ADDRESS = re.compile(
    r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+)):(?P<port>[0-9]{1,5})"
)


def address(value) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[::1]:9108`` for IPv6) to listen on; empty for none."""
    if value is None or isinstance(value, tuple):
        return value
    text = str(value).strip()
    if not text:
        return None
    found = _ADDRESS.fullmatch(text)
    if found is None or not 1 <= int(found["port"]) <= 65535:
        raise ValueError
    return found["ipv6"] or found["host"], int(found["port"])


class Setting(NamedTuple):
    """A setting of the app's config."""

    env: str
    key: str
    parse: Callable[[Any], Any]
    default: Any
    accepts: str
    #: Read by the API's rate limiter alone, and parsed by its library
    #: (``limits``): checked where the service is built (``mapapi serve``),
    #: so that the commands that never limit a request never import it.
    limiter: bool = False


class CommandSetting(NamedTuple):
    """A setting a command reads itself, not through the app's config."""

    env: str
    accepts: str
    #: Never shown, not even in an error about it.
    secret: bool = False


_RATE = "a rate such as '1000 per hour' (N per second, minute, hour or day; N at least 1)"
_BOOLEAN = "one of 1 0 true false yes no on off (any case)"

#: Every setting of the app's config. The database's default depends on the
#: instance folder (``defaults``), so it is declared as None.
SETTINGS = (
    Setting("MAPAPI_DATABASE_URL", "SQLALCHEMY_DATABASE_URI", database_url, None,
            "a database URL: sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/NAME"),
    Setting("MAPAPI_RATELIMIT_STORAGE_URI", "RATELIMIT_STORAGE_URI", rate_limit_storage, "memory://",
            "memory:// or redis://HOST:PORT/N (rediss://, redis+sentinel://, redis+cluster:// too)", limiter=True),
    Setting("MAPAPI_RATELIMIT_GENERAL", "RATELIMIT_GENERAL", rate, "1000 per hour", _RATE, limiter=True),
    Setting("MAPAPI_RATELIMIT_MAP_CREATE", "RATELIMIT_MAP_CREATE", rate, "50 per hour", _RATE, limiter=True),
    Setting("MAPAPI_RATELIMIT_BULK", "RATELIMIT_BULK", rate, "20 per hour", _RATE, limiter=True),
    Setting("MAPAPI_RATELIMIT_SYNC", "RATELIMIT_SYNC", rate, "100 per hour", _RATE, limiter=True),
    Setting("MAPAPI_BOOTSTRAP", "BOOTSTRAP", boolean, "1", _BOOLEAN),
    # How many reverse proxies in front of the service set X-Forwarded-*;
    # 0 trusts none, so a client cannot choose its own rate-limit address.
    Setting("MAPAPI_TRUSTED_PROXIES", "TRUSTED_PROXIES", integer(0), "0", "a whole number, 0 or more"),
    # Connections kept per process; waitress runs 8 threads by default.
    Setting("MAPAPI_DATABASE_POOL_SIZE", "DATABASE_POOL_SIZE", integer(1), "8", "a whole number, 1 or more"),
    Setting("MAPAPI_EVENTS_RETENTION_DAYS", "EVENTS_RETENTION_DAYS", integer(1), "30", "a whole number of days, 1 or more"),
    Setting("MAPAPI_WEBHOOKS_ALLOW_PRIVATE", "WEBHOOKS_ALLOW_PRIVATE", boolean, "0", _BOOLEAN),
    Setting("MAPAPI_WEBHOOKS_DELIVER", "WEBHOOKS_DELIVER", boolean, "1", _BOOLEAN),
    # An endpoint every attempt to which has failed for this long is switched off.
    Setting("MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS", "WEBHOOKS_DISABLE_AFTER_HOURS", hours, "120",
            f"a decimal number of hours above 0 and at most {MAX_HOURS}, such as 120 or 0.5"),
    Setting("MAPAPI_IDEMPOTENCY_TTL_HOURS", "IDEMPOTENCY_TTL_HOURS", integer(1), "24", "a whole number of hours, 1 or more"),
    # How long a key stays "in use" when the process running its request
    # died: a retry after that runs the request afresh (docs/decisions.md).
    Setting("MAPAPI_IDEMPOTENCY_LEASE_SECONDS", "IDEMPOTENCY_LEASE_SECONDS", integer(1), "30", "a whole number of seconds, 1 or more"),
    Setting("MAPAPI_CORS_ORIGINS", "CORS_ORIGINS", origins, "",
            "empty, * or comma-separated origins such as https://app.example.com,http://localhost:3000"),
    Setting("MAPAPI_GZIP_MIN_BYTES", "GZIP_MIN_BYTES", integer(0), "1024", "a whole number of bytes, 0 (off) or more"),
    Setting("MAPAPI_VIEW_TILES", "VIEW_TILES", tile_template, "https://tile.openstreetmap.org/{z}/{x}/{y}.png",
            "none, or an http(s) tile URL template with {z}, {x} and {y}, such as https://tile.openstreetmap.org/{z}/{x}/{y}.png"),
    # The service's address as clients see it: the base of every absolute URL
    # it writes (/ogcapi's links, OAuth's metadata); empty: each request's own.
    Setting("MAPAPI_PUBLIC_URL", "PUBLIC_URL", public_url, "",
            "empty (each request's own scheme and host) or scheme://host[:port] with no path, such as https://maps.example.com"),
    Setting("MAPAPI_OAUTH_TOKEN_SECONDS", "OAUTH_TOKEN_SECONDS", integer(60), "3600",
            "a whole number of seconds, 60 or more"),
    # Where `serve` and `worker` answer GET /metrics (Prometheus); None: nowhere.
    Setting("MAPAPI_METRICS_ADDRESS", "METRICS_ADDRESS", address, "",
            "empty (no metrics) or HOST:PORT to listen on, such as 127.0.0.1:9108 ([::1]:9108 for IPv6)"),
)  # fmt: skip

#: Each rate-limit bucket, by the name clients read (``GET /rate-limits``,
#: a 429's message), and the setting that sizes it.
RATE_LIMIT_BUCKETS = {
    "general": "MAPAPI_RATELIMIT_GENERAL",
    "mapCreation": "MAPAPI_RATELIMIT_MAP_CREATE",
    "bulk": "MAPAPI_RATELIMIT_BULK",
    "sync": "MAPAPI_RATELIMIT_SYNC",
}

#: Environment variable -> Flask config key.
ENVIRONMENT = {setting.env: setting.key for setting in SETTINGS}
#: What every app checks (``app_base``), and what the service's adds.
BASE_SETTINGS = tuple(setting for setting in SETTINGS if not setting.limiter)
LIMITER_SETTINGS = tuple(setting for setting in SETTINGS if setting.limiter)

_SERVE_LIMIT = "a whole number, 1 or more"

#: The settings a command reads itself: ``serve``'s options (an option given
#: on the command line wins over its variable), the instance folder (read
#: before there is a config), ``mcp``'s service and key.
COMMAND_SETTINGS = (
    CommandSetting("MAPAPI_INSTANCE_PATH", "a folder: where the SQLite file and config.py are"),
    CommandSetting("MAPAPI_HOST", "an address to listen on, such as 127.0.0.1 or 0.0.0.0 (serve --host)"),
    CommandSetting("MAPAPI_PORT", "a port, 1 to 65535 (serve --port)"),
    CommandSetting("MAPAPI_THREADS", f"{_SERVE_LIMIT} (serve --threads)"),
    CommandSetting("MAPAPI_CONNECTION_LIMIT", f"{_SERVE_LIMIT} (serve --connection-limit)"),
    CommandSetting("MAPAPI_IDLE_TIMEOUT", f"{_SERVE_LIMIT} (serve --idle-timeout)"),
    CommandSetting("MAPAPI_HEADER_TIMEOUT", f"{_SERVE_LIMIT} (serve --header-timeout)"),
    CommandSetting("MAPAPI_SEND_TIMEOUT", f"{_SERVE_LIMIT} (serve --send-timeout)"),
    CommandSetting("MAPAPI_URL", "the running service's http:// or https:// URL (mcp --url)"),
    CommandSetting("MAPAPI_KEY", "an API key (mapapi mcp)", secret=True),
)  # fmt: skip

#: The test suite's own variables (tests/backends.py, tests/test_soak.py):
#: they reach the ``mapapi`` processes the tests start, and mapapi reads none.
TEST_SUITE_VARIABLES = frozenset(
    {
        "MAPAPI_TEST_BACKEND",
        "MAPAPI_TEST_POSTGRES_URL",
        "MAPAPI_TEST_REDIS_URL",
        "MAPAPI_SOAK_SECONDS",
        "MAPAPI_SOAK_SEED",
    }
)

#: Every ``MAPAPI_*`` setting, by name: what it accepts, and whether it is secret.
ACCEPTS = {
    **{setting.env: (setting.accepts, False) for setting in SETTINGS},
    **{setting.env: (setting.accepts, setting.secret) for setting in COMMAND_SETTINGS},
}
#: An environment file's comment after a value (`` # ...``), or a value that is one.
_INLINE_COMMENT = re.compile(r"(?:^|\s)#")


def check_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Refuse a ``MAPAPI_*`` name that is no setting, and a value with an
    inline comment, before anything starts: SettingError naming the first."""
    problems = environment_problems(environ)
    if problems:
        raise SettingError(problems[0])


def environment_problems(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Every ``MAPAPI_*`` name that is no setting, then every value with an
    inline comment: one line each.

    Names are compared in any case (``mapapi_bootstrap`` is refused too), and
    the line names the setting the operator most likely meant.
    """
    problems = [
        f"{name} is not a setting; did you mean {likely_meant(name)}?"
        for name in sorted(environ)
        if name.upper().startswith("MAPAPI_")
        and name not in ACCEPTS
        and name not in TEST_SUITE_VARIABLES
    ]
    for name, (accepts, secret) in ACCEPTS.items():
        value = environ.get(name, "")
        if _INLINE_COMMENT.search(value):
            written = name if secret else f"{name}={shown_text(name, value)}"
            problems.append(
                f"{written} is not accepted: it holds an inline comment, which would be read "
                f"as part of the value (write comments on lines of their own); it takes {accepts}."
            )
    return problems


def likely_meant(name: str) -> str:
    """The setting whose name is closest to ``name``."""
    (closest,) = difflib.get_close_matches(name.upper(), sorted(ACCEPTS), n=1, cutoff=0)
    return closest


def defaults(instance_path: str) -> dict:
    """The built-in settings; the database lives in the instance folder."""
    declared = {setting.key: setting.default for setting in SETTINGS}
    return {
        **declared,
        "SQLALCHEMY_DATABASE_URI": "sqlite:///" + os.path.join(instance_path, "mapapi.sqlite3"),
        "RATELIMIT_STRATEGY": "moving-window",
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
        # Attempts one process makes at the same time, on one event loop (an
        # account gets a quarter of them at most: delivery/worker.py).
        "WEBHOOKS_CONCURRENCY": 128,
    }


def from_environment(environ: Mapping[str, str] = os.environ) -> dict:
    """The settings given as ``MAPAPI_*`` environment variables (an empty one is unset)."""
    return {key: environ[name] for name, key in ENVIRONMENT.items() if environ.get(name)}


def check(config: dict, settings=SETTINGS, environ: Mapping[str, str] = os.environ) -> None:
    """Parse ``settings`` of ``config`` in place; SettingError on the first bad one."""
    problems = value_problems(config, settings, environ)
    if problems:
        raise SettingError(problems[0])


def value_problems(config: dict, settings=SETTINGS, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Parse ``settings`` of ``config`` in place: one line for each bad value.

    A line names the environment variable when the value came from there,
    else the config key (``instance/config.py``).
    """
    problems = []
    for setting in settings:
        value = config[setting.key]
        try:
            config[setting.key] = setting.parse(value)
        except SettingError as error:
            problems.append(str(error))
        except ValueError:
            name = setting.env if environ.get(setting.env) else setting.key
            problems.append(f"{name}={shown(setting, value)} is not accepted: it takes {setting.accepts}.")
    return problems


def given(config: Mapping, settings=SETTINGS) -> tuple:
    """The ``settings`` whose value in ``config`` is not their default: those
    a command that does not read them still checks, without importing the
    libraries that parse them when nothing is set."""
    return tuple(setting for setting in settings if config.get(setting.key) != setting.default)


def environment_settings(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Every value of a setting given in ``environ`` checked as the service
    checks it, for a command that builds no app (``mcp``, ``sync``)."""
    config = from_environment(environ)
    return value_problems(config, [s for s in SETTINGS if s.key in config], environ)


def shown(setting: Setting, value) -> str:
    """The value as the error shows it: quoted, escaped, any password hidden."""
    return shown_text(setting.env, str(value))


def shown_text(name: str, text: str) -> str:
    """``text``, the value of setting ``name``, quoted and escaped; a URL's password hidden."""
    if name.endswith(("_URL", "_URI")):
        text = without_password(text)
    return repr(text)


def without_password(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part, and of a
    ``password=`` parameter, replaced by ``***``.

    The user part ends at the last ``@``: a password written with ``@``,
    ``/``, ``#`` or ``:`` in it is hidden whole, even where it makes the
    URL one that no parser reads as meant.
    """
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        user_info, _, place = rest.rpartition("@")
        user, colon, _password = user_info.partition(":")
        rest = f"{user}{':***' if colon else ''}@{place}"
    return re.sub(r"(?i)(\bpassword=)[^&]*", r"\1***", f"{scheme}{separator}{rest}")


def _user_info(url: str) -> str:
    """The ``user:password`` part of ``url`` as written (up to its last ``@``)."""
    _scheme, separator, rest = url.partition("://")
    return rest.rpartition("@")[0] if separator else ""


def engine_options(database_url: str, pool_size: int) -> dict:
    """Connection pool settings: sized for the server's threads.

    A connection the database dropped (a restart) is replaced before use by
    ``database.configure_engine``. The timeouts turn an unreachable database
    into a quick 503 rather than a hung request: connecting gives up after
    3 s, a connection whose packets go unacknowledged (a lost network) is
    dropped after 10 s, and no statement runs longer than 30 s.
    """
    from .contract.documents import document_text

    options = {
        "pool_size": pool_size,
        "max_overflow": pool_size,
        "pool_timeout": 5,
        "json_serializer": document_text,
        # A failed statement's error, and SQLAlchemy's own statement log,
        # never show its parameters (a webhook's secret, a key's hash).
        "hide_parameters": True,
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
