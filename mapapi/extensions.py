"""The database extension, created unbound and bound to an app in ``create_app``.

Flask-Limiter's is created beside the buckets (``http.ratelimit``) and
Flask-Migrate's beside the migrations (``storage.upgrade``): the ``mapapi``
commands that only read and write accounts and keys import neither.
"""

from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session as FlaskSession
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

from .storage.database import reading_isolation


class Base(DeclarativeBase):
    # Named constraints: the same names on SQLite and PostgreSQL, so that
    # migrations can refer to them and errors.py can recognise a violation.
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class Session(FlaskSession):
    """A session whose commit can be held back until the request's answer is
    known, and whose reads see one snapshot.

    While ``info["commit_held"]`` is set, ``commit()`` only flushes: the
    work stays in the open transaction, to be committed together with the
    answer kept for its ``Idempotency-Key`` (``http.idempotency``), so that
    a process that dies in between leaves both or neither.
    """

    def get_bind(self, *args, **kwargs):
        return reading_isolation(super().get_bind(*args, **kwargs))

    def commit(self) -> None:
        if self.info.get("commit_held"):
            self.flush()
            return
        super().commit()


# Objects stay readable after commit, so a view can dump what it just wrote
# without reloading it.
db = SQLAlchemy(
    model_class=Base, session_options={"expire_on_commit": False, "class_": Session}
)
