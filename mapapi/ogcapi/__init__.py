"""OGC API - Features (Parts 1, 3 and 4) at /ogcapi: each map of the key's
account a collection, each location a Feature, for GIS tools (QGIS, GDAL,
OWSLib). Another door into the same house: the list's filters, the
export's Features and the API's services (contract section 14)."""

from flask import Flask

from ..http.auth import OGC_PREFIX
from . import collections, documents, edits, items


def register_ogcapi(app: Flask) -> None:
    for module in (documents, collections, items, edits):
        app.register_blueprint(module.bp, url_prefix=OGC_PREFIX)
