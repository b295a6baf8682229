"""The service's log on stderr: lines written in batches, in order, never lost at exit."""

import io
import logging
import subprocess
import sys
import time

import pytest

from mapapi.log_output import FLUSH_BYTES, FLUSH_SECONDS, BatchedStreamHandler

from .helpers import wait_until


@pytest.fixture
def written():
    """A logger whose lines go through a BatchedStreamHandler into a string."""
    stream = io.StringIO()
    handler = BatchedStreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger(f"test.log_output.{id(stream)}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)
    handler.close()


def test_an_informational_line_waits_then_is_written_within_the_flush_delay(written):
    logger, stream = written
    logger.info("first")
    assert stream.getvalue() == ""
    started = time.monotonic()
    assert wait_until(lambda: stream.getvalue() == "INFO first\n", 5.0, interval=0.01)
    assert time.monotonic() - started < FLUSH_SECONDS + 2  # a loaded machine's slack


def test_a_warning_is_written_at_once_after_the_lines_before_it(written):
    logger, stream = written
    logger.info("one")
    logger.info("two")
    logger.warning("three")
    assert stream.getvalue() == "INFO one\nINFO two\nWARNING three\n"


def test_a_full_batch_is_written_at_once(written):
    logger, stream = written
    line = "x" * 1000
    for _ in range(FLUSH_BYTES // 1000 + 1):
        logger.info(line)
    assert stream.getvalue().count(line) == FLUSH_BYTES // 1000 + 1


def test_closing_writes_what_waits(written):
    logger, stream = written
    logger.info("last words")
    logger.handlers[0].close()
    assert stream.getvalue() == "INFO last words\n"


def test_a_process_that_exits_writes_its_last_lines():
    """``logging.shutdown`` at exit flushes the handler: nothing kept is lost."""
    script = (
        "import logging\n"
        "from mapapi.log_output import log_to_stderr\n"
        "log_to_stderr()\n"
        "for n in range(3):\n"
        "    logging.getLogger('mapapi.access').info('line %d', n)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == ["line 0", "line 1", "line 2"]
    assert all(" INFO mapapi.access: " in line for line in lines)

