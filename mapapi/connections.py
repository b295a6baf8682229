"""What one connection may take from `mapapi serve`: waitress's request
parser, channel and server, each with a bound added.

waitress alone lets a client with no key hurt everyone else in three ways
(read in its source, 3.0.2, and measured):

- a body is buffered whole (to a temporary file past 512 KiB, up to 1 GiB)
  before the application sees the request and can refuse it;
- a worker thread whose answers nobody reads waits, with no time-out, for
  the client to take them before it serves the connection's next
  pipelined request: a few such connections hold every thread;
- a connection that sends its headers a byte at a time is never idle, so
  its channel time-out never closes it.

Here a body over the limit is counted and dropped instead of kept; a
connection whose unsent answers pass ``PARK_ABOVE_BYTES`` is parked (its
next request waits, not a thread) and resumed by the event loop once the
client has read them; and every connection has deadlines, checked once a
second by the event loop: headers whole within the header time-out, a
pending answer taken within the send time-out, an idle connection closed
after the idle time-out. docs/limits.md lists the figures.
"""

import fcntl
import io
import logging
import struct
import termios
from functools import partial

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer

log = logging.getLogger(__name__)

#: Answers a connection may have waiting to be sent before its next pipelined
#: request waits for the client to read them (which costs no thread).
PARK_ABOVE_BYTES = 1024 * 1024
#: Connections taken in at most per turn of the event loop.
ACCEPTS_PER_TURN = 64
#: waitress's own body cap, which answers in plain text: the parser's comes first.
NO_LIMIT = 2**62


class DiscardedBody:
    """A request body buffer that keeps nothing: a refused body's bytes are
    counted and dropped as they arrive."""

    def __init__(self):
        self.length = 0

    def __len__(self):
        return self.length

    def append(self, data: bytes) -> None:
        self.length += len(data)

    def getfile(self):
        return io.BytesIO()

    def close(self) -> None:
        pass


class BoundedRequestParser(HTTPRequestParser):
    """waitress's request parser, refusing a body over ``limits.body_bytes``
    without keeping it.

    The request still goes to the application, with its headers (and a
    ``Content-Length`` that says how much was sent) but an empty body, so
    that it answers the contract's checks in their order and 413
    ``PAYLOAD_TOO_LARGE`` last. A refused body of up to
    ``limits.drain_bytes`` is read and dropped first, so that the client,
    still sending, reads the answer and may keep the connection. Past that
    (or announced past it, or with ``Expect: 100-continue``) the request is
    answered at once and the connection closed after the answer: nothing
    more of the body is read.
    """

    def __init__(self, adj, limits):
        super().__init__(adj)
        self.limits = limits
        self.refused = False

    def received(self, data: bytes) -> int:
        if self.completed:
            return 0
        if self.body_rcv is None:
            consumed = super().received(data)
            if (
                self.headers_finished
                and self.error is None
                and not self.chunked
                and self.content_length > self.limits.body_bytes
            ):
                return self._refuse_declared_body(data, consumed)
            return consumed
        if self.refused:
            return self._discard(data)
        consumed = super().received(data)
        if not self.completed and self.body_bytes_received > self.limits.body_bytes:
            self._start_refusing()  # chunked: only counting tells the size
        return consumed

    def _refuse_declared_body(self, data: bytes, consumed: int) -> int:
        if self.expect_continue or self.content_length > self.limits.drain_bytes:
            self.expect_continue = False  # never invite the body
            return self._answer_now(data)
        self._start_refusing()
        return consumed

    def _start_refusing(self) -> None:
        self.refused = True
        self.expect_continue = False
        self.body_rcv.getbuf().close()
        self.body_rcv.buf = DiscardedBody()

    def _discard(self, data: bytes) -> int:
        consumed = self.body_rcv.received(data)
        self.body_bytes_received += consumed
        if self.body_rcv.error:
            self.error = self.body_rcv.error
            self.completed = True
        elif self.body_rcv.completed:
            self.completed = True
            self._report_length()
        elif self.body_bytes_received > self.limits.drain_bytes:
            return self._answer_now(data)
        return consumed

    def _answer_now(self, data: bytes) -> int:
        """Complete the request without the rest of its body, and close the
        connection after the answer; the rest of ``data`` is that body."""
        if self.body_rcv is not None:
            self.body_rcv.getbuf().close()
            self.body_rcv = None
        self.refused = True
        self.completed = True
        self.headers["CONNECTION"] = "close"
        self._report_length()
        return len(data)

    def _report_length(self) -> None:
        # The application refuses by Content-Length; a chunked body has none.
        if self.chunked:
            self.headers["CONTENT_LENGTH"] = str(self.body_bytes_received)


class GuardedChannel(HTTPChannel):
    """waitress's connection, which never holds a worker thread for a client
    that does not read, and closes itself when a deadline passes."""

    def __init__(self, server, sock, addr, adj, map=None):
        self.limits = server.limits
        self.parser_class = partial(BoundedRequestParser, limits=server.limits)
        self.parked = False  # its next request waits for its answers to be read
        self.writing = False  # a worker is writing an answer
        self.timed_request = None  # the partial request whose headers are timed
        self.timed_since = 0.0
        self.unacknowledged = 0  # what the client had not taken at the last check
        super().__init__(server, sock, addr, adj, map)
        self.taken_at = self.last_activity  # when the client last took a byte

    def service(self):
        with self.outbuf_lock:
            if self.connected and self.total_outbufs_len > PARK_ABOVE_BYTES:
                self.parked = True
                return
        super().service()

    def write_soon(self, data):
        self.writing = True
        try:
            return super().write_soon(data)
        finally:
            self.writing = False

    def _flush_outbufs_below_high_watermark(self):
        # waitress waits here (no time-out) both within an answer and before
        # a connection's next pipelined request. Within an answer the wait
        # stays, up to the send time-out; before the next request,
        # ``service`` parks the connection instead.
        if self.writing:
            super()._flush_outbufs_below_high_watermark()

    def handle_write(self):
        super().handle_write()
        with self.outbuf_lock:
            resume = self.parked and self.connected and self.total_outbufs_len <= PARK_ABOVE_BYTES
            if resume:
                self.parked = False
        if resume:
            self.server.add_task(self)

    def deadline_passed(self, now: float) -> bool:
        """Whether the connection has outlived one of its time-outs.

        Called once a second by the event loop. ``last_activity`` moves when
        a byte is received or sent, and when a request ends. The socket's
        own buffer may hold megabytes of an answer: the client is reading
        as long as what it has not acknowledged shrinks.
        """
        unacknowledged = unacknowledged_bytes(self.socket)
        if unacknowledged < self.unacknowledged or (unacknowledged and not self.unacknowledged):
            self.taken_at = now  # taking, or only just given something to take
        self.unacknowledged = unacknowledged
        if self.total_outbufs_len or unacknowledged:
            return now - max(self.last_activity, self.taken_at) > self.limits.send_timeout
        quiet = now - self.last_activity
        if self.requests:
            return False  # in service, or waiting for a thread
        if self.request is not None and not self.request.headers_finished:
            if self.timed_request is not self.request:
                self.timed_request, self.timed_since = self.request, now
            elif now - self.timed_since > self.limits.header_timeout:
                return True
        return quiet > self.limits.idle_timeout


def unacknowledged_bytes(sock) -> int:
    """Bytes written to ``sock`` that its peer has not acknowledged (Linux's
    SIOCOUTQ); 0 where that cannot be asked."""
    try:
        answer = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4)
    except (OSError, ValueError, AttributeError):
        return 0
    return struct.unpack("i", answer)[0]


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with guarded channels and their deadlines."""

    channel_class = GuardedChannel

    def __init__(self, application, limits, **kwargs):
        self.limits = limits
        super().__init__(application, **kwargs)

    def handle_accept(self):
        # waitress takes one connection per turn of its event loop, a turn
        # that costs more with each open connection: after a burst of a
        # thousand, a new client waited a second to be taken in.
        for _ in range(ACCEPTS_PER_TURN):
            known = len(self._map)
            if known >= self.adj.connection_limit:
                return
            super().handle_accept()
            if len(self._map) == known:
                return  # none waiting (or one that failed)

    def maintenance(self, now):
        expired = [
            channel
            for channel in list(self.active_channels.values())
            if channel.deadline_passed(now)
        ]
        if expired:
            # Closed outright, not marked: a client that reads nothing keeps
            # its socket unwritable, so a mark would never be acted on. After
            # this pass of the event loop, which is iterating the channels.
            self.trigger.pull_trigger(partial(_close, expired))


def _close(channels) -> None:
    for channel in channels:
        if channel.connected:
            channel.handle_close()


def create_server(
    application, host: str, port: int, limits, *, keep_forwarded: bool = False
) -> GuardedServer:
    """A guarded waitress server listening on ``host:port``.

    waitress's own 1 GiB body cap and idle-channel sweep are replaced by the
    parser's and the channels' bounds; ``poll()`` rather than ``select()``,
    which cannot watch a descriptor numbered 1024 or more. waitress drops
    the ``X-Forwarded-*`` headers of a proxy it was not told to trust:
    ``keep_forwarded`` passes them on to the app, whose own proxy fix
    (``MAPAPI_TRUSTED_PROXIES``) reads as many hops as it trusts.
    """
    adj = Adjustments(
        host=host,
        port=port,
        threads=limits.threads,
        connection_limit=limits.connection_limit,
        channel_timeout=limits.idle_timeout,
        cleanup_interval=1,
        asyncore_use_poll=True,
        max_request_body_size=NO_LIMIT,
        clear_untrusted_proxy_headers=not keep_forwarded,
    )
    if len(adj.listen) > 1:
        log.warning("%s names several addresses; serving on the first only", host)
    return GuardedServer(application, limits, map={}, adj=adj, sockinfo=adj.listen[0])
