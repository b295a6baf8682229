"""The base of every app: the settings, checked, and the database.

``create_app`` builds the service on it. The ``mapapi`` commands that only
read and write the data (accounts, keys, events, ``db``) and ``worker`` run
in the base alone: it imports neither the HTTP side (blueprints, schemas,
the rate limiter) nor Alembic, so those commands start in a fraction of
the time. (None of them changes maps or what they hold, so none records
events: the journal is part of the service.)
"""

import os

from flask import Flask

from . import config as settings
from .extensions import db
from .storage.database import configure_engine


def create_base_app(config: dict | None = None) -> Flask:
    """Raises ``config.SettingError`` when a setting has a name or value it cannot take."""
    instance_path = os.path.abspath(os.environ.get("MAPAPI_INSTANCE_PATH") or "instance")
    # No static folder: the pages (/docs, /view) send their files from installed packages.
    app = Flask(
        "mapapi", instance_path=instance_path, instance_relative_config=True, static_folder=None
    )
    load_config(app, config)
    bind_database(app)
    return app


def load_config(app: Flask, overrides: dict | None) -> None:
    settings.check_environment()
    app.config.from_mapping(settings.defaults(app.instance_path))
    app.config.from_pyfile("config.py", silent=True)
    app.config.from_mapping(settings.from_environment())
    app.config.from_mapping(overrides or {})
    # Every command checks every setting: the rate limiter's too, when given
    # (their defaults are good, and parsing them imports the limiter's library).
    settings.check(app.config, settings.BASE_SETTINGS + settings.given(app.config, settings.LIMITER_SETTINGS))


def bind_database(app: Flask) -> None:
    app.config.setdefault(
        "SQLALCHEMY_ENGINE_OPTIONS",
        settings.engine_options(
            app.config["SQLALCHEMY_DATABASE_URI"], app.config["DATABASE_POOL_SIZE"]
        ),
    )
    db.init_app(app)
    with app.app_context():
        configure_engine(db.engine)
