"""The API's description and its interactive reference, both without a key.

``/api/v1/openapi.json`` is the OpenAPI document itself (not wrapped in
``data``: tools read it as it is). ``/docs`` is Swagger UI, served from the
``swagger-ui-bundle-v2`` package so that it works offline.
"""

from flask import Blueprint, current_app, jsonify, redirect, render_template_string
from swagger_ui_bundle import swagger_ui_path

from ..http.auth import OPENAPI_PATH
from ..http.static_files import send_asset
from .openapi import build_document

bp = Blueprint("reference", __name__)

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>mapapi — API reference</title>
  <link rel="icon" type="image/png" href="{{ assets }}/favicon-32x32.png">
  <link rel="stylesheet" href="{{ assets }}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{{ assets }}/swagger-ui-bundle.js"></script>
  <script src="{{ assets }}/swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: {{ document_url|tojson }},
      dom_id: "#swagger-ui",
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
      layout: "BaseLayout",
      deepLinking: true,
      persistAuthorization: true,
      displayRequestDuration: true,
      validatorUrl: null
    });
  </script>
</body>
</html>
"""


@bp.get(OPENAPI_PATH)
def openapi_document():
    """The OpenAPI 3.1 document of this API."""
    return jsonify(api_document(current_app))


def api_document(app) -> dict:
    """``app``'s OpenAPI document, built once."""
    document = app.extensions.get("mapapi.openapi")
    if document is None:
        document = app.extensions["mapapi.openapi"] = build_document(app)
    return document


@bp.get("/")
def home():
    """The service's root: its reference page."""
    return redirect("/docs", code=302)


@bp.get("/docs")
def reference_page():
    """The interactive reference (Swagger UI)."""
    return render_template_string(PAGE, assets="/docs/assets", document_url=OPENAPI_PATH)


@bp.get("/docs/assets/<path:filename>")
def reference_asset(filename):
    """One file of the page, cacheable, from the ``swagger-ui-bundle-v2`` package."""
    return send_asset(swagger_ui_path, filename)
