"""The app factory: the base (settings, database), then the HTTP side:
extensions, hooks, blueprints, error handlers, metrics, commands."""

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from . import config as settings
from .api import register_blueprints
from .api.health import bp as health_bp
from .app_base import create_base_app
from .commands import register_commands
from .contract.docs_page import bp as reference_bp
from .contract.jsonprovider import OrjsonProvider
from .http import hooks, idempotency, ratelimit, refused_keys
from .http.errors import register_error_handlers
from .http.pipeline import Pipeline
from .http.routing import IdConverter
from .mcp.front import Front
from .mcp.remote import bp as mcp_bp
from .oauth import views as oauth
from .ogcapi import register_ogcapi
from .services import journal
from .storage.upgrade import register_migrations
from .view.page import bp as view_bp


def create_app(config: dict | None = None) -> Flask:
    """Build the app; ``config`` wins over every other setting.

    Raises ``config.SettingError`` when a setting has a value it cannot take.
    """
    app = create_base_app(config)
    settings.check(app.config, settings.LIMITER_SETTINGS)
    # "/api/v1//maps" is no path of the contract: a JSON 404, not Werkzeug's
    # redirect (an HTML 308) to the path with the slashes merged.
    app.url_map.merge_slashes = False
    # Before any route: every <variable> refuses the words routes spell out.
    app.url_map.converters["default"] = IdConverter
    app.json = OrjsonProvider(app)  # keys keep their order: the client's properties too
    register_extensions(app)
    # /mcp's tool calls answered in front of Flask's views; what every request
    # passes around both, once; behind the proxies' fix.
    app.wsgi_app = Pipeline(Front(app, app.wsgi_app), app.config["GZIP_MIN_BYTES"])
    trust_proxies(app)
    register_hooks(app)
    register_blueprints(app)
    app.register_blueprint(health_bp)
    app.register_blueprint(reference_bp)
    app.register_blueprint(view_bp)
    app.register_blueprint(mcp_bp)
    register_ogcapi(app)
    oauth.init_app(app)
    register_error_handlers(app)
    register_commands(app)
    return app


def register_extensions(app: Flask) -> None:
    register_migrations(app)
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
