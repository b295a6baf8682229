"""What the command shows while it writes: a progress bar on a terminal
(tqdm: rows done, rows per second, time left), a line per batch elsewhere
(a pipe, a log), and every pause with its reason."""

import shutil
import sys
import time

from tqdm import tqdm

from .http_client import Wait


class Progress:
    """The writes of one run, ``total`` rows in all, shown on ``stream``."""

    def __init__(self, total: int, stream=None):
        self.stream = stream or sys.stdout
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar = None
        if self.stream.isatty():
            # shutil reads the window's size, and falls back to 80 x 24 where
            # it has none (a bare pseudo-terminal), which tqdm would take as
            # room for no bar at all.
            size = shutil.get_terminal_size()
            self.bar = tqdm(
                total=total,
                unit="row",
                file=self.stream,
                ncols=size.columns,
                nrows=size.lines,
                smoothing=0.1,
            )

    def batch(self, what: str, number: int, count: int, rows: int, outcome: str) -> None:
        """Batch ``number`` of ``count`` (``what``: upsert, bulk delete) wrote ``rows`` rows."""
        self.done += rows
        if self.bar is not None:
            self.bar.set_postfix_str("", refresh=False)
            self.bar.update(rows)
            return
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        self.line(
            f"{what} {number}/{count}: {rows} rows ({outcome}); "
            f"{self.done}/{self.total} rows done, {rate:.0f} rows/s"
        )

    def wait(self, pause: Wait) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"waiting {pause.seconds:.0f} s: {pause.reason}")
        else:
            self.line(f"waiting {pause.seconds:.0f} s: {pause.reason}")

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
