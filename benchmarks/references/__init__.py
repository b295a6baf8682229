"""Reference servers that do the work of mapapi's reads another way, for comparison.

Each is a script started as its own process: ``bare.py`` (a JSON view and
nothing else), ``floor.py`` (every check mapapi makes, on the database
driver alone), ``tuned_floor.py`` (the floor, its page of locations one
JSON value the database writes), ``peer.py`` (the same reads as FastAPI's tutorial
teaches them), and mapapi's own app served another way:
``unguarded.py`` (on plain waitress, without ``mapapi serve``'s connection
guards), ``retry_switch.py`` (its request steps of safe retries switched off and on),
``metrics_switch.py`` (serving its metrics, their per-request step switched off
and on) and ``again.py`` (``mapapi serve`` itself, the control).
"""
