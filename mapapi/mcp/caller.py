"""Who a tool call over ``/mcp`` is made for, and what its API request keeps
of the ``/mcp`` request: shared by the view (``remote``), the layer in front
of Flask (``front``) and the SDK's side (``bridge``), below all three."""

from dataclasses import dataclass
from functools import cached_property

from werkzeug.wrappers import Response
from werkzeug.wsgi import get_current_url

#: What a tool call's API request keeps of the ``/mcp`` request's WSGI
#: environ: where the request came in, and from whom.
KEPT_ENVIRON = (
    "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "HTTP_HOST", "REMOTE_ADDR", "wsgi.version",
    "wsgi.url_scheme", "wsgi.errors", "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once",
)  # fmt: skip


def kept_environ(environ: dict) -> dict:
    """The entries of ``environ`` a tool call's API request keeps (``KEPT_ENVIRON``)."""
    return {name: environ[name] for name in KEPT_ENVIRON if name in environ}


@dataclass
class KeyCheck:
    """A tool call's key check, left to the API requests the call makes."""

    #: The API's answer refusing the key (a 401, or a 403 for an account
    #: without a plan): the answer to ``/mcp`` too.
    refusal: Response | None = None
    #: Whether an API request got past the key's checks.
    passed: bool = False

    def learn(self, status: int, body, answer) -> None:
        """What the API's answer (``status``, its JSON ``body``) says of the
        key; ``answer()`` gives that answer whole."""
        if self.passed or self.refusal is not None:
            return
        if status == 401 or (status == 403 and _error_code(body) != "INSUFFICIENT_SCOPE"):
            self.refusal = answer()
        # A 429 or a 5xx may come before the key's check: it tells nothing.
        elif status != 429 and status < 500:
            self.passed = True


def _error_code(body) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("code") if isinstance(error, dict) else None


@dataclass(frozen=True)
class Caller:
    """What a tool call's API request needs of the ``/mcp`` request that carried it."""

    authorization: str | None
    request_id: str
    read_only: bool
    #: The WSGI environ's entries in ``KEPT_ENVIRON``.
    environ: dict
    #: The key check of a tool call, when the view left it to the API (None: done).
    key_check: KeyCheck | None = None

    @cached_property
    def base_url(self) -> str:
        """The service's address as the caller reached it (for the export's notes)."""
        return get_current_url(self.environ, host_only=True)
