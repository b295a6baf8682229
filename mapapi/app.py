"""The app factory: settings, extensions, hooks, blueprints, error handlers, commands."""

import os

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from . import config as settings
from .api import register_blueprints
from .api.health import bp as health_bp
from .cli import register_commands
from .contract.docs_page import bp as reference_bp
from .contract.jsonprovider import OrjsonProvider
from .extensions import db, migrate
from .http import hooks, ratelimit
from .http.errors import register_error_handlers
from .storage.database import configure_engine

MIGRATIONS = os.path.join(os.path.dirname(__file__), "storage", "migrations")


def create_app(config: dict | None = None) -> Flask:
    """Build the app; ``config`` wins over every other setting."""
    instance_path = os.path.abspath(os.environ.get("MAPAPI_INSTANCE_PATH", "instance"))
    # No static files: outside /api/v1 only /healthz exists.
    app = Flask(
        __name__, instance_path=instance_path, instance_relative_config=True, static_folder=None
    )
    load_config(app, config)
    # "/api/v1//maps" is no path of the contract: a JSON 404, not Werkzeug's
    # redirect (an HTML 308) to the path with the slashes merged.
    app.url_map.merge_slashes = False
    app.json = OrjsonProvider(app)  # keys keep their order: the client's properties too
    register_extensions(app)
    trust_proxies(app)
    register_hooks(app)
    register_blueprints(app)
    app.register_blueprint(health_bp)
    app.register_blueprint(reference_bp)
    register_error_handlers(app)
    register_commands(app)
    return app


def load_config(app: Flask, overrides: dict | None) -> None:
    app.config.from_mapping(settings.defaults(app.instance_path))
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_mapping(settings.from_environment())
    app.config.from_mapping(overrides or {})


def register_extensions(app: Flask) -> None:
    database_url = app.config["SQLALCHEMY_DATABASE_URI"]
    if database_url.startswith("sqlite:///"):
        os.makedirs(app.instance_path, exist_ok=True)
    app.config.setdefault(
        "SQLALCHEMY_ENGINE_OPTIONS",
        settings.engine_options(database_url, int(app.config["DATABASE_POOL_SIZE"])),
    )
    db.init_app(app)
    # Batch mode: SQLite alters a table by copying it, which Alembic then does.
    migrate.init_app(app, db, directory=MIGRATIONS, render_as_batch=True, compare_type=True)
    with app.app_context():
        configure_engine(db.engine)
    ratelimit.init_app(app)


def trust_proxies(app: Flask) -> None:
    """Read the client's address and scheme from N trusted proxies' headers."""
    hops = int(app.config["TRUSTED_PROXIES"])
    if hops > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)


def register_hooks(app: Flask) -> None:
    app.before_request(hooks.before_request)
    app.after_request(hooks.after_request)
