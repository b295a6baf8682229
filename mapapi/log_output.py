"""Where ``mapapi serve`` and ``mapapi worker`` write their log: stderr, in batches.

The access log writes a line per request. Written one by one, each line is
a ``write`` system call made by the request's thread under the handler's
lock, and the thread gives up the interpreter (the GIL) around it: with
eight threads serving, the other threads queue on that lock and on the GIL
again, and the refused-key request served 3% to 4% fewer requests per
second than with lines written in batches (measured, benchmarks/RESULTS.md).
So lines are kept in memory and written together:

- at once, with every line before it, for a warning or an error;
- otherwise within ``FLUSH_SECONDS`` of the first line kept, or as soon
  as ``FLUSH_BYTES`` are waiting;
- at exit (``logging.shutdown`` flushes every handler), after a SIGTERM too.

Lines keep their order. What a SIGKILL can lose is the last
``FLUSH_SECONDS`` of informational lines.
"""

import logging
import threading
import time

FLUSH_SECONDS = 0.2
FLUSH_BYTES = 64 * 1024
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class BatchedStreamHandler(logging.StreamHandler):
    """A ``StreamHandler`` that writes its lines in batches (see the module's docstring)."""

    def __init__(self, stream=None):
        super().__init__(stream)
        self._pending: list[str] = []
        self._pending_bytes = 0
        self._waiting = threading.Event()  # set while lines wait to be written
        self._closed = False
        self._writer = threading.Thread(
            target=self._write_after_delay, name="mapapi-log-writer", daemon=True
        )
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the line; write now what waits if it is a warning or the batch is full.

        Called by ``Handler.handle`` with the handler's lock held.
        """
        try:
            line = self.format(record) + self.terminator
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)
            return
        self._pending.append(line)
        self._pending_bytes += len(line)
        if record.levelno >= logging.WARNING or self._pending_bytes >= FLUSH_BYTES:
            self._write_pending(record)
        elif len(self._pending) == 1:
            self._waiting.set()

    def flush(self) -> None:
        with self.lock:
            self._write_pending()

    def close(self) -> None:
        """Write what is left and let the writer end.

        ``logging.shutdown`` calls this holding the handler's lock, which the
        writer needs: waiting for the writer here would wait until a time-out,
        at every exit. The writer is a daemon thread, and finds nothing left.
        """
        with self.lock:
            self._closed = True
            self._write_pending()
        self._waiting.set()
        super().close()

    def _write_pending(self, record: logging.LogRecord | None = None) -> None:
        lines, self._pending, self._pending_bytes = self._pending, [], 0
        self._waiting.clear()
        if not lines:
            return
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:  # noqa: BLE001 - as StreamHandler.emit: report, never raise
            self.handleError(record or logging.makeLogRecord({"msg": lines[-1].rstrip()}))

    def _write_after_delay(self) -> None:
        while not self._closed:
            self._waiting.wait()
            if not self._closed:
                time.sleep(FLUSH_SECONDS)
            self.flush()


def log_to_stderr() -> None:
    """Time, level, logger and message on stderr, written in batches.

    The format names no thread, process or source line, so records skip
    collecting them (the logging HOWTO's "Optimization"): the access log
    writes one record per request.
    """
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # no caller lookup (findCaller) per record
    if not logging.root.handlers:  # else basicConfig would leave them, and this one unused
        logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=[BatchedStreamHandler()])
