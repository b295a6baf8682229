"""Small helpers that make accounts, keys and resources for tests."""

from mapapi.contract.schemas import SCOPES
from mapapi.extensions import db
from mapapi.services import accounts
from mapapi.services.keys import issue_key

API = "/api/v1"


def create_account(app, email: str, plan: str = "pro", until=None) -> str:
    with app.app_context():
        account = accounts.create_account(email, plan, until)
        db.session.commit()
        return account.id


def create_key(app, email: str, scope: str = "READ_WRITE", expires_at=None, name="test") -> str:
    assert scope in SCOPES
    with app.app_context():
        key = issue_key(accounts.account_by_email(email), name, scope, expires_at)
        db.session.commit()
        return key.secret


class ApiClient:
    """Flask's test client with a key and the ``/api/v1`` prefix."""

    def __init__(self, client, key: str | None):
        self.client = client
        self.key = key

    def request(self, method: str, path: str, headers=None, **kwargs):
        sent = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        sent.update(headers or {})
        return self.client.open(API + path, method=method, headers=sent, **kwargs)

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)

    def put(self, path, **kwargs):
        return self.request("PUT", path, **kwargs)

    def delete(self, path, **kwargs):
        return self.request("DELETE", path, **kwargs)

    def created(self, path, body: dict) -> dict:
        """POST ``body`` and return the created resource, asserting a 201."""
        response = self.post(path, json=body)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["data"]


def make_map(api: ApiClient, **fields) -> dict:
    return api.created("/maps", {"title": "Test map", **fields})


def make_location(api: ApiClient, map_id: str, **fields) -> dict:
    return api.created(f"/maps/{map_id}/locations", {"name": "Spot", "lat": 1.5, "lng": 2.5, **fields})


def make_layer(api: ApiClient, map_id: str, **fields) -> dict:
    return api.created(f"/maps/{map_id}/layers", {"name": "Layer", **fields})


def make_tag(api: ApiClient, map_id: str, **fields) -> dict:
    return api.created(f"/maps/{map_id}/tags", {"name": "tag", **fields})


def make_category(api: ApiClient, map_id: str, **fields) -> dict:
    return api.created(f"/maps/{map_id}/categories", {"name": "Category", **fields})


def error_code(response) -> str:
    """The contract's error code of ``response`` (asserting the envelope)."""
    body = response.get_json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "details"}, body
    return body["error"]["code"]
