"""``mapapi sync``: a CSV or GeoJSON file kept in step with a map, in one command.

A client of a running service, like ``mapapi mcp``: it imports neither Flask
nor SQLAlchemy, only the contract's own input schemas to check the file.
One module per job: ``source`` reads the file, ``rows`` checks each row by
the contract's rules, ``current`` reads the map's locations from the
GeoJSON export, ``plan`` compares the two and packs the writes,
``http_client`` sends them with retries, ``progress`` shows them, and
``command`` is the command itself.
"""
