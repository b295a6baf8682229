"""Run by Debian's /usr/bin/python3 (QGIS's own): open a map of /ogcapi as an
OAPIF layer with a Basic authentication configuration holding the key, and
print what QGIS read as one JSON line.

Arguments: the service's base URL, the map's id, the key.
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["QGIS_AUTH_DB_DIR_PATH"] = tempfile.mkdtemp()

from qgis.core import QgsApplication, QgsAuthMethodConfig, QgsVectorLayer  # noqa: E402

base, map_id, key = sys.argv[1:4]
app = QgsApplication([], False)
app.initQgis()
manager = QgsApplication.authManager()
manager.setMasterPassword("test master password", True)
config = QgsAuthMethodConfig()
config.setName("mapapi")
config.setMethod("Basic")
config.setConfig("username", key)
config.setConfig("password", "")
manager.storeAuthenticationConfig(config)
layer = QgsVectorLayer(
    f"url='{base}/ogcapi' typename='{map_id}' authcfg={config.id()}", "map", "OAPIF"
)
features = {}
if layer.isValid():
    for feature in layer.getFeatures():
        point = feature.geometry().asPoint()
        features[feature["id"]] = [feature["name"], point.x(), point.y()]
print(json.dumps({"valid": layer.isValid(), "count": layer.featureCount(), "features": features}))
sys.stdout.flush()
os._exit(0)  # QGIS 3.22 may crash while it tears itself down, after the work is done
