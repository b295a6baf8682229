"""``mapapi serve`` once more: the same code as mapapi's own server, in a second process.

The control of the comparisons with mapapi's twins (plain waitress, without
the retry steps): how far apart two identical servers come out, measured
the same way in the same run, is the smallest difference those
comparisons can see.
Usage: ``python again.py PORT THREADS`` (the settings come from the environment).
"""

import sys

from mapapi.console import main

if __name__ == "__main__":
    port, threads = sys.argv[1:3]
    sys.argv = ["mapapi", "serve", "--host", "127.0.0.1", "--port", port, "--threads", threads]
    main()
