"""``mapapi serve`` whose request steps of safe retries a signal switches off and on.

Those steps run on every request, whether it sends ``Idempotency-Key``,
``If-Match`` or ``If-None-Match`` or not: the key's lookup and format
check, the precondition, keeping the outcome, the ETag of every single
resource. SIGUSR1 makes them pass every request and response through
untouched (the answers then carry no ``ETag``); SIGUSR2 puts them back.
Everything else is ``mapapi serve`` itself (its server, guards, log set-up
and webhook delivery thread).

The benchmark measures this one process in turns, steps on and steps off:
two processes running the same code differ by a few per cent of their
own (where the system placed them, their memory layout), which is as
much as the steps could cost; one process switched between the two does
not.
Usage: ``python retry_switch.py PORT THREADS`` (the settings come from the environment).
"""

import signal
import sys

from mapapi.console import main
from mapapi.http import etags, idempotency


def passes(_request):
    return None


def unchanged(response):
    return response


#: Each step switched off, by module (mapapi/http/hooks.py calls each
#: through its module): a check passes, a response is left as it is.
SWITCHED_OFF = {
    idempotency: {"seen_before": passes, "check_key_format": passes, "finish": unchanged},
    etags: {"check_precondition": passes, "add_etag": unchanged},
}
ORIGINALS = {
    module: {name: getattr(module, name) for name in steps}
    for module, steps in SWITCHED_OFF.items()
}


def install(functions) -> None:
    for module, by_name in functions.items():
        for name, function in by_name.items():
            setattr(module, name, function)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, lambda *_: install(SWITCHED_OFF))
    signal.signal(signal.SIGUSR2, lambda *_: install(ORIGINALS))
    port, threads = sys.argv[1:3]
    sys.argv = ["mapapi", "serve", "--host", "127.0.0.1", "--port", port, "--threads", threads]
    main()
