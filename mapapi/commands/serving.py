"""What ``serve`` and ``worker`` share: where an option's value came from,
and the metrics' own address."""

import click

from .refusals import SettingRefused
from ..metrics import serve_metrics
from .common import check_address


def source_of(name: str, option: str, variable: str) -> str:
    """How to name the parameter ``name`` in an error: its option, or its
    variable when the value came from there."""
    source = click.get_current_context().get_parameter_source(name)
    return variable if source is click.core.ParameterSource.ENVIRONMENT else option


def start_metrics(app, api_address: tuple[str, int] | None = None) -> str | None:
    """Answer Prometheus on ``MAPAPI_METRICS_ADDRESS``, if set: its URL.

    An address the process cannot listen on, or the API's own, is refused
    before anything starts, in one line (exit 2).
    """
    address = app.config["METRICS_ADDRESS"]
    if address is None:
        return None
    host, port = address
    if address == api_address:
        raise SettingRefused(
            f"MAPAPI_METRICS_ADDRESS: {host}:{port} is the API's own address; "
            "give the metrics a port of their own."
        )
    check_address(host, port, "MAPAPI_METRICS_ADDRESS")
    try:
        serve_metrics(app, address)
    except OSError as error:  # taken between the check and the bind
        raise SettingRefused(
            f"MAPAPI_METRICS_ADDRESS: cannot listen on {host}:{port} ({error.strerror})."
        ) from None
    shown_host = f"[{host}]" if ":" in host else host
    return f"http://{shown_host}:{port}/metrics"
