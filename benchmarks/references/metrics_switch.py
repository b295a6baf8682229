"""``mapapi serve`` serving its metrics, whose per-request step a signal switches off and on.

With ``MAPAPI_METRICS_ADDRESS`` set (to a free port, here), every answer
is counted and timed (``mapapi/http/request_metrics.py``). SIGUSR1 makes
that step pass every response through untouched; SIGUSR2 puts it back.
Everything else is ``mapapi serve`` itself, metrics server included.

The benchmark measures this one process in turns, metrics on and off (see
``retry_switch.py`` for why one process rather than two).
Usage: ``python metrics_switch.py PORT THREADS`` (the settings come from the environment).
"""

import os
import signal
import socket
import sys

from mapapi.console import main
from mapapi.http import request_metrics

ON = request_metrics.observe


def unchanged(response):
    return response


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, lambda *_: setattr(request_metrics, "observe", unchanged))
    signal.signal(signal.SIGUSR2, lambda *_: setattr(request_metrics, "observe", ON))
    os.environ["MAPAPI_METRICS_ADDRESS"] = free_address()
    port, threads = sys.argv[1:3]
    sys.argv = ["mapapi", "serve", "--host", "127.0.0.1", "--port", port, "--threads", threads]
    main()
