"""The Flask extensions, created unbound and bound to an app in ``create_app``."""

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


# Objects stay readable after commit, so a view can dump what it just wrote
# without reloading it.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})

# Flask-Limiter supplies the configured storage and moving-window strategy;
# mapapi.ratelimit checks the contract's buckets with it, passing each
# bucket's key explicitly, so this key function is only Flask-Limiter's default.
limiter = Limiter(key_func=get_remote_address)
