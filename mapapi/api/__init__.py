"""The v1 API: one blueprint per resource, all under ``/api/v1``."""

from flask import Flask

from ..http.auth import API_PREFIX
from . import categories, events, grants, keys, layers, limits, locations, maps, tags, webhooks


def register_blueprints(app: Flask) -> None:
    for module in (maps, locations, categories, tags, layers, keys, events, webhooks, limits, grants):
        app.register_blueprint(module.bp, url_prefix=API_PREFIX)
