"""The bare view: a Flask JSON view under waitress, set up as ``mapapi serve`` is.

No key, no limit, no database: what one request costs the stack itself.
Usage: ``python bare.py PORT THREADS``.
"""

import logging
import sys

import waitress
from flask import Flask, jsonify

app = Flask("bare")


@app.get("/")
def bare():
    return jsonify(data={"ok": True})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    waitress.serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]))
