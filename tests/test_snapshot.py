"""A reading request sees one snapshot: what another request commits between
two of its statements shows up in none of them."""

from sqlalchemy import delete, event, select, update

from mapapi.extensions import db
from mapapi.storage.models import ApiKey, Layer, Map

from . import backends
from .factories import make_layer, make_location, make_map


def commit_between_statements(app, marker: str, change, *, queue: bool = True):
    """Run ``change`` on a connection of its own, committed, just before the
    app sends its first statement containing ``marker``; with ``queue``,
    after waiting its turn behind the app's writers (SQLite), as they do."""
    done = []

    def before_statement(_connection, _cursor, statement, *_args):
        if not done and marker in statement:
            done.append(statement)
            with db.engine.connect() as other:
                with other.execution_options(write_lock=queue).begin():
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


def delete_map_during(app, api, map_id: str, marker: str, *, queue: bool = True):
    """GET the map's locations; its map is deleted, committed, just before the
    app's first statement containing ``marker``."""
    change = delete(Map).where(Map.id == map_id)
    done, stop = commit_between_statements(app, marker, change, queue=queue)
    try:
        response = api.get(f"/maps/{map_id}/locations")
    finally:
        stop()
    assert done, f"no statement held {marker!r}"
    return response


def test_the_map_read_with_the_key_is_of_the_same_snapshot_as_the_page(app, api):
    map_id = make_map(api)["id"]
    make_location(api, map_id)
    assert api.get("/keys").status_code == 200  # lastUsedAt written: one transaction
    response = delete_map_during(app, api, map_id, "count(")
    assert response.status_code == 200, response.get_json()
    assert len(response.get_json()["data"]["locations"]) == 1
    assert api.get(f"/maps/{map_id}").status_code == 404


def test_a_map_deleted_after_the_key_check_is_not_found_by_the_page(app, api):
    """The key is checked in a statement of its own (storage.driver); the
    page reads its map in its own snapshot, here also after the key's
    lastUsedAt was written in a transaction between the two."""
    map_id = make_map(api)["id"]
    make_location(api, map_id)
    with app.app_context():
        db.session.execute(update(ApiKey).values(last_used_at=None))
        db.session.commit()
    response = delete_map_during(app, api, map_id, "FROM maps")
    assert response.status_code == 404, response.get_json()
    with app.app_context():  # the request's key, and only it, was written
        assert len(db.session.scalars(select(ApiKey).where(ApiKey.last_used_at.is_not(None))).all()) == 1
