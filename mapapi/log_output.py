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

Every record is one line (``OneLineFormatter``): a line break inside a
message is written escaped, and an exception becomes its type, a safe
description and where it was raised, on the same line. A failed
statement is described by its table and error (``failed_statements``),
never its parameters nor the values a driver's message quotes.
"""

import logging
import re
import threading
import time
import traceback
from pathlib import PurePath

from sqlalchemy.exc import StatementError

from .storage.failed_statements import describe, first_line

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


#: What ``str.splitlines`` breaks a line at.
_LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
#: Frames of a traceback a line names, innermost first.
FRAMES_SHOWN = 8
#: Characters of an exception's message a line keeps.
MESSAGE_CHARACTERS = 200


class OneLineFormatter(logging.Formatter):
    """``logging.Formatter``, each record on one line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            line += " | " + describe_exception(record.exc_info[1])
        if record.stack_info:
            line += " | " + record.stack_info
        return _LINE_BREAKS.sub(_escaped, line)


def describe_exception(error: BaseException) -> str:
    """``Type: what happened (at file.py:12 in f < caller.py:40 in g)``.

    A failed statement says its table and its error only; another
    exception the first line of its message, cut to ``MESSAGE_CHARACTERS``.
    """
    if isinstance(error, StatementError):
        what = describe(error)
    else:
        what = first_line(error)[:MESSAGE_CHARACTERS]
    frames = traceback.extract_tb(error.__traceback__)[-FRAMES_SHOWN:]
    where = " < ".join(
        f"{PurePath(frame.filename).parent.name}/{PurePath(frame.filename).name}:"
        f"{frame.lineno} in {frame.name}"
        for frame in reversed(frames)
    )
    text = f"{type(error).__name__}: {what}" if what else type(error).__name__
    return f"{text} (at {where})" if where else text


def _escaped(found: re.Match) -> str:
    return found.group().encode("unicode_escape").decode("ascii")


def log_to_stderr() -> None:
    """Time, level, logger and message on stderr, one line a record, written in batches.

    The format names no thread, process or source line, so records skip
    collecting them (the logging HOWTO's "Optimization"): the access log
    writes one record per request.
    """
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # no caller lookup (findCaller) per record
    if not logging.root.handlers:  # else basicConfig would leave them, and this one unused
        handler = BatchedStreamHandler()
        handler.setFormatter(OneLineFormatter(FORMAT))
        logging.basicConfig(level=logging.INFO, handlers=[handler])
