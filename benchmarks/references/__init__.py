"""Reference servers that do the work of mapapi's reads another way, for comparison.

Each is a script started as its own process: ``bare.py`` (a JSON view and
nothing else), ``floor.py`` (every check mapapi makes, on the database
driver alone), ``peer.py`` (the same reads as FastAPI's tutorial
teaches them) and ``unguarded.py`` (mapapi's own app on plain waitress,
without ``mapapi serve``'s connection guards).
"""
