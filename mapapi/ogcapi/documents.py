"""The documents that need no key: the landing page, the conformance
declaration and the API definition."""

from flask import Blueprint

from .answers import JSON, OPENAPI_30, answer, check_format, link, url
from .openapi30 import build_document

bp = Blueprint("ogcapi_documents", __name__)

_FEATURES = "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/"
_FILTERING = "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/"
_CQL2 = "http://www.opengis.net/spec/cql2/1.0/conf/"
_EDITING = "http://www.opengis.net/spec/ogcapi-features-4/1.0/conf/"
#: Exactly what is built, nothing more: a client that reads a class here
#: relies on it.
CONFORMS_TO = [
    *(_FEATURES + name for name in ("core", "geojson", "oas30")),
    *(
        _FILTERING + name
        for name in (
            "queryables",
            "queryables-query-parameters",
            "filter",
            "features-filter",
        )
    ),
    *(
        _CQL2 + name
        for name in (
            "cql2-text",
            "cql2-json",
            "basic-cql2",
            "advanced-comparison-operators",
            "basic-spatial-functions",
        )
    ),
    *(_EDITING + name for name in ("create-replace-delete", "update")),
]


@bp.get("/")
@bp.get("")
def landing_page():
    """The landing page: where the API definition, conformance and data are."""
    check_format("json")
    return answer(
        {
            "title": "mapapi",
            "description": "Your maps as OGC API - Features collections: each location a Feature.",
            "links": [
                link(url(), "self", JSON, "This document"),
                link(url("/api"), "service-desc", OPENAPI_30, "The API definition"),
                link(url("/conformance"), "conformance", JSON, "Conformance classes"),
                link(url("/collections"), "data", JSON, "The maps"),
            ],
        }
    )


@bp.get("/conformance")
def conformance():
    """The conformance classes implemented."""
    check_format("json")
    return answer({"conformsTo": CONFORMS_TO})


@bp.get("/api")
def api_definition():
    """The OpenAPI 3.0 document of /ogcapi."""
    check_format("json")
    return answer(build_document(), OPENAPI_30)
