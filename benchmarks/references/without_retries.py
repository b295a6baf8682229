"""``mapapi serve`` without the request steps of safe retries (Idempotency-Key, ETag).

Those steps run on every request, whether it sends ``Idempotency-Key``,
``If-Match`` or ``If-None-Match`` or not: the key's lookup and format
check, the precondition, keeping the outcome, the ETag of every single
resource. Here they pass every request and response through untouched,
and the rest is ``mapapi serve`` itself (its server, guards, log set-up and
webhook delivery thread), so that the same code with and without them
shows what they cost a request that sends neither header. Its answers
carry no ``ETag``.
Usage: ``python without_retries.py PORT THREADS`` (the settings come from the environment).
"""

import sys

from mapapi.console import main
from mapapi.http import etags, idempotency


def passes(_request):
    return None


def unchanged(response):
    return response


if __name__ == "__main__":
    # mapapi/http/hooks.py calls each step through its module.
    idempotency.seen_before = idempotency.check_key_format = passes
    etags.check_precondition = passes
    idempotency.finish = etags.add_etag = unchanged
    port, threads = sys.argv[1:3]
    sys.argv = ["mapapi", "serve", "--host", "127.0.0.1", "--port", port, "--threads", threads]
    main()
