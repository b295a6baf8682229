"""A reading request sees one snapshot: what another request commits between
two of its statements shows up in none of them."""

from sqlalchemy import delete, event

from mapapi.extensions import db
from mapapi.models import Layer

from .factories import make_layer, make_location, make_map


def commit_between_statements(app, marker: str, change):
    """Run ``change`` on a connection of its own, committed, just before the
    app sends its first statement containing ``marker``."""
    done = []

    def before_statement(_connection, _cursor, statement, *_args):
        if not done and marker in statement:
            done.append(statement)
            with db.engine.connect() as other:
                with other.execution_options(write_lock=True).begin():
                    other.execute(change)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", before_statement)
    return done, lambda: event.remove(engine, "before_cursor_execute", before_statement)


def test_a_layer_deleted_while_a_page_is_read_is_still_whole_in_it(app, api):
    map_id = make_map(api)["id"]
    layers = [make_layer(api, map_id, name=name) for name in ("kept", "deleted")]
    location = make_location(api, map_id)
    api.put(
        f"/maps/{map_id}/locations/{location['id']}/layers",
        json={"layerIds": [layer["id"] for layer in layers]},
    )
    assert api.get("/keys").status_code == 200  # lastUsedAt written: one transaction
    # The page's rows name both layers; the layers themselves are read next.
    done, stop = commit_between_statements(
        app, "SELECT layers.", delete(Layer).where(Layer.id == layers[1]["id"])
    )
    try:
        response = api.get(f"/maps/{map_id}/locations")
    finally:
        stop()
    assert done, "the layers were never read"
    assert response.status_code == 200, response.get_json()
    (listed,) = response.get_json()["data"]["locations"]
    assert [layer["id"] for layer in listed["layers"]] == [layer["id"] for layer in layers]
    after = api.get(f"/maps/{map_id}/locations/{location['id']}").get_json()["data"]
    assert [layer["id"] for layer in after["layers"]] == [layers[0]["id"]]
