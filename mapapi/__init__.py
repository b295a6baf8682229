"""mapapi: a self-hosted JSON API for maps, locations, categories, tags and layers."""

#: The package's version (setup.cfg reads it from here).
__version__ = "1.0.0"


def create_app(config: dict | None = None):
    """Build the Flask app; ``config`` wins over every other setting (see ``mapapi.app``).

    Imported on call, so that importing the package costs nothing: ``mapapi mcp``,
    a client of the service, starts without loading Flask and SQLAlchemy.
    """
    from .app import create_app as build

    return build(config)
