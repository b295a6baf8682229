"""``mapapi serve`` without the request steps of safe retries (Idempotency-Key, ETag).

Those steps run on every request, whether it sends ``Idempotency-Key``,
``If-Match`` or ``If-None-Match`` or not: the key's lookup and format
check, the precondition, keeping the outcome, the ETag of every single
resource. Here they pass every request and response through untouched,
in the same server (``mapapi.server.serve``: threads, guards, log set-up),
so that the same code with and without them shows what they cost a
request that sends neither header. Its answers carry no ``ETag``.
Usage: ``python without_retries.py PORT THREADS`` (the settings come from the environment).
"""

import sys

from mapapi import create_app, server
from mapapi.http import etags, idempotency
from mapapi.log_output import log_to_stderr


def unchanged(response=None):
    return response


if __name__ == "__main__":
    # mapapi/http/hooks.py calls each step through its module.
    idempotency.seen_before = idempotency.check_key_format = unchanged
    etags.check_precondition = unchanged
    idempotency.finish = etags.add_etag = unchanged
    log_to_stderr()
    server.serve(
        create_app(), "127.0.0.1", int(sys.argv[1]), server.Limits(threads=int(sys.argv[2]))
    )
