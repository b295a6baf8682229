"""Serving the app with waitress, within limits, and stopping without
dropping a request.

The limits (threads, connections, time-outs: ``Limits``) are options of
`mapapi serve`, each also read from a ``MAPAPI_*`` variable; what each
connection may take is enforced in ``connections``.

On SIGTERM or SIGINT the server stops accepting connections, lets the
requests it has already received run to their responses, then closes its
connections and returns, so the process exits 0. A process manager's
restart therefore never cuts an acknowledged write in half.
"""

import logging
import resource
import signal
import threading
import time
from dataclasses import dataclass, replace

import click
from waitress import wasyncore

from .config import MAX_BODY_BYTES
from .connections import create_server

log = logging.getLogger(__name__)

#: How long in-flight requests may take to finish after a stop signal.
DRAIN_SECONDS = 30.0
#: How long a connection accepted just before the signal, and not read yet,
#: gets for its request to arrive.
READ_GRACE_SECONDS = 0.5


@dataclass(frozen=True)
class Limits:
    """What the server gives its clients; docs/limits.md says why each default."""

    threads: int = 8
    connection_limit: int = 2000
    idle_timeout: int = 30
    header_timeout: int = 10
    send_timeout: int = 60
    body_bytes: int = MAX_BODY_BYTES
    #: A refused body is read and dropped up to this size, so that the
    #: client reads the answer; past it the connection is closed.
    drain_bytes: int = 4 * 1024 * 1024
    #: Sockets the process opens itself: its webhook attempts, when it delivers.
    outgoing_sockets: int = 0

    def open_files_needed(self) -> int:
        # A connection is a socket, plus a temporary file for a body over
        # 512 KiB or for answers waiting past 1 MiB; a few for the rest.
        return 2 * self.connection_limit + 64 + self.outgoing_sockets

    def connections_fitting(self, open_files: int) -> int:
        """The connections that ``open_files`` leaves room for (at least one):
        ``open_files_needed`` the other way round."""
        return max(1, (open_files - 64 - self.outgoing_sockets) // 2)


#: The settings of `mapapi serve` beyond its address: option, variable, help.
LIMIT_OPTIONS = (
    ("threads", "MAPAPI_THREADS", "Worker threads: requests served at once."),
    ("connection_limit", "MAPAPI_CONNECTION_LIMIT", "Open connections at most."),
    (
        "idle_timeout",
        "MAPAPI_IDLE_TIMEOUT",
        "Seconds an idle or stalled connection stays open.",
    ),
    (
        "header_timeout",
        "MAPAPI_HEADER_TIMEOUT",
        "Seconds a request's headers may take to arrive.",
    ),
    (
        "send_timeout",
        "MAPAPI_SEND_TIMEOUT",
        "Seconds a client may take no byte of its answer.",
    ),
)


def limit_options(command):
    """Add the limits' options (each also read from its variable) to ``command``."""
    for name, variable, text in reversed(LIMIT_OPTIONS):
        command = click.option(
            "--" + name.replace("_", "-"),
            name,
            envvar=variable,
            default=getattr(Limits, name),
            show_default=True,
            show_envvar=True,
            type=click.IntRange(min=1),
            help=text,
        )(command)
    return command


def raise_open_files_limit(limits: Limits) -> Limits:
    """Raise the process's open-files limit to what ``limits`` needs, as far
    as the hard limit allows; fewer connections when it does not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = limits.open_files_needed()
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < needed:
        fitting = limits.connections_fitting(soft)
        log.warning(
            "open-files limit %d is too low for %d connections: accepting %d",
            soft, limits.connection_limit, fitting,
        )  # fmt: skip
        limits = replace(limits, connection_limit=fitting)
    return limits


def listen(app, host: str, port: int, limits: Limits | None = None):
    """A server bound to ``host:port`` (OSError when it cannot be), not yet serving."""
    attempts = app.config["WEBHOOKS_CONCURRENCY"] if app.config["WEBHOOKS_DELIVER"] else 0
    limits = replace(
        limits or Limits(), body_bytes=app.config["MAX_CONTENT_LENGTH"], outgoing_sockets=attempts
    )
    limits = raise_open_files_limit(limits)
    return create_server(app, host, port, limits, keep_forwarded=app.config["TRUSTED_PROXIES"] > 0)


def run(server) -> None:
    """Serve until SIGTERM or SIGINT, then stop as the module says."""
    stopping = threading.Event()

    def request_stop(signum, _frame):
        if stopping.is_set():
            return
        stopping.set()
        log.info(
            "%s: finishing the requests in progress, then stopping",
            signal.Signals(signum).name,
        )
        shutdown(server)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    server.run()  # returns once every connection and the listener are closed
    server.task_dispatcher.shutdown(timeout=5)
    log.info("stopped")


def shutdown(server) -> threading.Thread:
    """Stop accepting, let the requests in progress finish, then close every
    connection, which makes ``server.run()`` return. Safe from any thread."""
    listening_stopped = threading.Event()

    def stop_listening():
        _stop_listening(server)
        listening_stopped.set()

    server.trigger.pull_trigger(stop_listening)
    closer = threading.Thread(
        target=_close_when_idle, args=(server, listening_stopped), daemon=True
    )
    closer.start()
    return closer


def _stop_listening(server) -> None:
    # Connections the kernel already accepted are requests in flight for
    # their clients: take them in, or closing the socket would reset them.
    while True:
        known = len(server._map)
        server.handle_accept()
        if len(server._map) == known:
            break
    server.accepting = False
    wasyncore.dispatcher.close(server)  # the listening socket only, not the trigger


def _is_idle(server) -> bool:
    dispatcher = server.task_dispatcher
    if dispatcher.queue or dispatcher.active_count:
        return False
    return all(
        not channel.requests and channel.request is None and not channel.total_outbufs_len
        for channel in list(server.active_channels.values())
    )


def _has_unread(server) -> bool:
    """Whether a connection was taken in and nothing read from it yet: its
    request may still be on its way."""
    return any(
        channel.last_activity == channel.creation_time
        for channel in list(server.active_channels.values())
    )


def _close_when_idle(server, listening_stopped: threading.Event) -> None:
    # The event loop takes in the connections already accepted first; one
    # taken in then but not read yet looks idle, so it gets a short grace.
    # An idle server, with no such connection, closes at once.
    listening_stopped.wait(timeout=1)
    now = time.monotonic()
    grace_end, deadline = now + READ_GRACE_SECONDS, now + DRAIN_SECONDS
    while time.monotonic() < deadline and (
        not _is_idle(server) or (_has_unread(server) and time.monotonic() < grace_end)
    ):
        time.sleep(0.02)

    def close_everything():
        for dispatcher in list(server._map.values()):
            dispatcher.handle_close()

    try:
        server.trigger.pull_trigger(close_everything)
    except OSError:  # the trigger is closed: the loop has already ended
        log.debug("server loop already closed")
