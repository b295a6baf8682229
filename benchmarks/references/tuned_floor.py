"""The tuned floor: the floor (``floor.py``), whose page of locations is
fetched as ONE JSON value built by the database.

Everything but the page is the floor's own (the key, the bucket, the map,
the headers, the access log). The page runs, on the raw driver, the SQL
text that mapapi's page of locations runs (compiled once at start from its
statement, ``location_reads._PAGE_DOCUMENTS``: the same work, none of the
stack around it); its JSON text goes into the body as it is, beside the
pagination encoded by orjson.

Usage: ``python tuned_floor.py PORT THREADS DATABASE_URL``, as ``floor.py``.
"""

import logging
import math
import sys

import floor
import orjson
import waitress
from floor import answer, app, authenticate, map_not_found, page_number


def compiled_page_sql(url: str) -> str:
    """mapapi's page statement as SQL text with named parameters for the driver."""
    from sqlalchemy.dialects import postgresql, sqlite

    from mapapi.services.location_reads import _PAGE_DOCUMENTS

    if url.startswith("sqlite"):
        return str(_PAGE_DOCUMENTS.compile(dialect=sqlite.dialect(paramstyle="named")))
    return str(_PAGE_DOCUMENTS.compile(dialect=postgresql.dialect(paramstyle="pyformat")))


PAGE_SQL = ""


def list_locations(map_id):
    account_id = authenticate()
    page, size = page_number("page", 1, None), page_number("pageSize", 50, 100)
    connection = floor.database.connection()
    sqlite = floor.database.sqlite
    if sqlite:
        connection.execute("BEGIN")
    try:
        owned = floor.database.sql("SELECT 1 FROM maps WHERE id = ? AND account_id = ?")
        if connection.execute(owned, (map_id, account_id)).fetchone() is None:
            raise map_not_found()
        counted = floor.database.sql("SELECT count(*) FROM locations WHERE map_id = ?")
        total = connection.execute(counted, (map_id,)).fetchone()[0]
        text = "[]"
        if (page - 1) * size < total:
            params = {"map_id": map_id, "limit": size, "offset": (page - 1) * size}
            text = connection.execute(PAGE_SQL, params).fetchone()[0]
    finally:
        connection.execute("COMMIT") if sqlite else connection.rollback()
    pagination = {"total": total, "page": page, "pageSize": size,
                  "totalPages": math.ceil(total / size)}  # fmt: skip
    body = b'{"data":{"locations":' + text.encode() + b',"pagination":'
    return answer(200, body + orjson.dumps(pagination) + b"}}")


app.view_functions["list_locations"] = list_locations


if __name__ == "__main__":
    port, threads, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    floor.database = floor.Database(url)
    PAGE_SQL = compiled_page_sql(url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    waitress.serve(app, host="127.0.0.1", port=port, threads=threads)
