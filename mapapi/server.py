"""Serving the app with waitress, and stopping without dropping a request.

On SIGTERM or SIGINT the server stops accepting connections, lets the
requests it has already received run to their responses, then closes its
connections and returns, so the process exits 0. A process manager's
restart therefore never cuts an acknowledged write in half.
"""

import logging
import signal
import threading
import time

import waitress
from waitress import wasyncore

log = logging.getLogger(__name__)

#: How long in-flight requests may take to finish after a stop signal.
DRAIN_SECONDS = 30.0
#: How long a connection accepted just before the signal gets to be read.
READ_GRACE_SECONDS = 0.5


def serve(app, host: str, port: int, threads: int) -> None:
    server = waitress.create_server(app, host=host, port=port, threads=threads)
    stopping = threading.Event()

    def request_stop(signum, _frame):
        if stopping.is_set():
            return
        stopping.set()
        log.info(
            "%s: finishing the requests in progress, then stopping", signal.Signals(signum).name
        )
        shutdown(server)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    log.info("Serving on http://%s:%s", server.effective_host, server.effective_port)
    server.run()  # returns once every connection and the listener are closed
    server.task_dispatcher.shutdown(timeout=5)
    log.info("stopped")


def shutdown(server) -> threading.Thread:
    """Stop accepting, let the requests in progress finish, then close every
    connection, which makes ``server.run()`` return. Safe from any thread."""
    server.trigger.pull_trigger(lambda: _stop_listening(server))
    closer = threading.Thread(target=_close_when_idle, args=(server,), daemon=True)
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


def _close_when_idle(server) -> None:
    # A connection just taken in may not have been read yet, and looks idle.
    time.sleep(READ_GRACE_SECONDS)
    deadline = time.monotonic() + DRAIN_SECONDS
    while not _is_idle(server) and time.monotonic() < deadline:
        time.sleep(0.05)

    def close_everything():
        for dispatcher in list(server._map.values()):
            dispatcher.handle_close()

    try:
        server.trigger.pull_trigger(close_everything)
    except OSError:  # the trigger is closed: the loop has already ended
        log.debug("server loop already closed")
