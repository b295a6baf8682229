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
from .http import hooks, idempotency, ratelimit, refused_keys
from .http.errors import register_error_handlers
from .http.routing import IdConverter
from .mcp.remote import bp as mcp_bp
from .services import journal
from .storage.database import configure_engine
from .storage.search_indexes import include_object
from .view.page import bp as view_bp

MIGRATIONS = os.path.join(os.path.dirname(__file__), "storage", "migrations")


def create_app(config: dict | None = None) -> Flask:
    """Build the app; ``config`` wins over every other setting.

    Raises ``config.SettingError`` when a setting has a value it cannot take.
    """
    instance_path = os.path.abspath(os.environ.get("MAPAPI_INSTANCE_PATH", "instance"))
    # No static folder: the pages (/docs, /view) send their files from installed packages.
    app = Flask(
        __name__, instance_path=instance_path, instance_relative_config=True, static_folder=None
    )
    load_config(app, config)
    # "/api/v1//maps" is no path of the contract: a JSON 404, not Werkzeug's
    # redirect (an HTML 308) to the path with the slashes merged.
    app.url_map.merge_slashes = False
    # Before any route: every <variable> refuses the words routes spell out.
    app.url_map.converters["default"] = IdConverter
    app.json = OrjsonProvider(app)  # keys keep their order: the client's properties too
    register_extensions(app)
    trust_proxies(app)
    register_hooks(app)
    register_blueprints(app)
    app.register_blueprint(health_bp)
    app.register_blueprint(reference_bp)
    app.register_blueprint(view_bp)
    app.register_blueprint(mcp_bp)
    register_error_handlers(app)
    register_commands(app)
    return app


def load_config(app: Flask, overrides: dict | None) -> None:
    app.config.from_mapping(settings.defaults(app.instance_path))
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_mapping(settings.from_environment())
    app.config.from_mapping(overrides or {})
    settings.check(app.config)


def register_extensions(app: Flask) -> None:
    app.config.setdefault(
        "SQLALCHEMY_ENGINE_OPTIONS",
        settings.engine_options(
            app.config["SQLALCHEMY_DATABASE_URI"], app.config["DATABASE_POOL_SIZE"]
        ),
    )
    db.init_app(app)
    # Batch mode: SQLite alters a table by copying it, which Alembic then does.
    migrate.init_app(
        app,
        db,
        directory=MIGRATIONS,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object,
    )
    with app.app_context():
        configure_engine(db.engine)
    journal.init_app(app)
    ratelimit.init_app(app)
    idempotency.init_app(app)
    refused_keys.init_app(app)


def trust_proxies(app: Flask) -> None:
    """Read the client's address and scheme from N trusted proxies' headers."""
    hops = app.config["TRUSTED_PROXIES"]
    if hops > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)


def register_hooks(app: Flask) -> None:
    app.before_request(hooks.before_request)
    app.after_request(hooks.after_request)
