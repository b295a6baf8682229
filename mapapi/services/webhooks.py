"""Webhook endpoints of an account, their pings, their delivery log, and
switching off an endpoint that keeps failing.

URLs are checked with the delivery package's address guard (a module that
uses nothing else of mapapi), when saved here and again at every attempt.
"""

import base64
import secrets

from flask import current_app
from sqlalchemy import func, select, update

from ..contract.serialization import compile_dumper
from ..contract.webhook_schemas import WebhookSchema
from ..delivery.addresses import AddressRefused, check_url
from ..extensions import db
from ..http.errors import conflict, not_found, validation_error
from ..storage.models import Account, Event, Map, Webhook, WebhookDelivery, could_be_id
from ..timeutil import utcnow
from .changes import same_value
from .events import PING, WEBHOOK_DISABLED, data_text, event_body, latest_id, record_one

MAX_WEBHOOKS = 10


def generate_secret() -> str:
    """``whsec_`` and the base64 of 32 random bytes (Standard Webhooks' form)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def create_webhook(account: Account, data: dict) -> Webhook:
    """A new endpoint of ``account``, its secret on ``.secret``; at most 10.

    The account's row is locked while its endpoints are counted (SQLite's
    write transactions are serialized anyway), so racing requests cannot
    pass the count together. It follows the feed from the newest event.
    """
    _check_fields(account, data, address_problems(data))
    db.session.execute(
        select(Account.pk).where(Account.pk == account.pk).with_for_update(key_share=True)
    )
    count = db.session.scalar(
        select(func.count()).select_from(Webhook).where(Webhook.account_id == account.id)
    )
    if count >= MAX_WEBHOOKS:
        raise conflict(f"An account holds at most {MAX_WEBHOOKS} webhook endpoints.")
    now = utcnow()
    webhook = Webhook(
        account_id=account.id,
        secret=generate_secret(),
        cursor=latest_id(account.id),
        created_at=now,
        enabled_since=now,
        disabled_since=None if data.get("enabled", True) else now,
        **data,
    )
    db.session.add(webhook)
    db.session.flush()
    return webhook


def update_webhook(webhook_id: str, account: Account, data: dict, url_problems: dict) -> Webhook:
    """Change the fields in ``data``; ``updatedAt`` moves only if one differs.

    ``url_problems`` is what ``address_problems`` found, before the caller
    locked the endpoint and compared its ETag: the row is locked and written
    in the transaction that compared it. Disabling stops events made from
    now on; enabling again starts with the events made from then on, and
    clears why the service had disabled it.
    """
    _check_fields(account, data, url_problems)
    webhook = find_webhook(webhook_id, account, lock=True)
    # Not changes.apply_changes: a webhook endpoint's changes are no events.
    changed = {
        name: value for name, value in data.items() if not same_value(getattr(webhook, name), value)
    }
    if not changed:
        return webhook
    now = utcnow()
    for name, value in changed.items():
        setattr(webhook, name, value)
    webhook.updated_at = now
    if "enabled" in changed:
        if webhook.enabled:
            webhook.enabled_since, webhook.disabled_since = now, None
            webhook.disabled_reason = webhook.failing_since = None
        else:
            webhook.disabled_since = now
    return webhook


def address_problems(data: dict) -> dict:
    """``{"url": [why]}`` when ``data``'s URL points where the service never
    sends; else ``{}``.

    Looking a name up may take seconds: the request's transaction (which
    on SQLite holds the database's write lock, on PostgreSQL maybe a row
    lock) is ended first, so call this before taking any lock.
    """
    if "url" not in data:
        return {}
    allow_private = current_app.config["WEBHOOKS_ALLOW_PRIVATE"]
    if not allow_private:
        db.session.commit()
    try:
        check_url(data["url"], allow_private=allow_private)
    except AddressRefused as refused:
        return {"url": [str(refused)]}
    return {}


def _check_fields(account: Account, data: dict, url_problems: dict) -> None:
    """The rules that need the network or the database: the URL's address
    (checked already: ``url_problems``) and the map's owner. Every field at
    fault is named at once."""
    details = dict(url_problems)
    map_id = data.get("map_id")
    if map_id is not None and not (
        could_be_id(map_id)
        and db.session.scalar(select(Map.pk).where(Map.id == map_id, Map.account_id == account.id))
    ):
        details["mapId"] = ["No map of this account has this id."]
    if details:
        raise validation_error("The webhook endpoint is not valid.", details)


def listed_webhooks(account: Account):
    """The account's endpoints in creation order."""
    return select(Webhook).where(Webhook.account_id == account.id).order_by(Webhook.pk)


def find_webhook(webhook_id: str, account: Account, *, lock: bool = False) -> Webhook:
    """Endpoint ``webhook_id`` of ``account``; NOT_FOUND otherwise."""
    statement = select(Webhook).where(Webhook.id == webhook_id, Webhook.account_id == account.id)
    if lock:
        statement = statement.with_for_update()
    found = could_be_id(webhook_id) and db.session.scalar(statement)
    if not found:
        raise not_found("Webhook endpoint")
    return found


def ping(webhook: Webhook) -> WebhookDelivery:
    """A ``ping`` event for ``webhook`` alone (the feed never shows one), due now."""
    event_id = record_one(webhook.account_id, PING, None, data_text({"webhookId": webhook.id}))
    delivery = first_attempt(webhook, db.session.get(Event, event_id))
    db.session.flush()
    return delivery


def first_attempt(webhook: Webhook, event: Event) -> WebhookDelivery:
    """The first delivery attempt of ``event`` to ``webhook``, due now."""
    delivery = WebhookDelivery(
        webhook_id=webhook.id,
        event_id=str(event.id),
        event_type=event.type,
        body=event_body(event).decode("utf-8"),
        next_attempt_at=utcnow(),
    )
    db.session.add(delivery)
    return delivery


def listed_deliveries(webhook: Webhook):
    """Its delivery attempts, newest first."""
    return (
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook.id)
        .order_by(WebhookDelivery.pk.desc())
    )


#: What an attempt given up with its endpoint reads in the delivery log.
GIVEN_UP = "given up: the endpoint was switched off"
_dump_webhook = compile_dumper(WebhookSchema())


def switch_off(webhook: Webhook, last_error: str) -> None:
    """Disable ``webhook`` (locked by the caller), every attempt to which has
    failed for ``WEBHOOKS_DISABLE_AFTER_HOURS``: its reason is kept, its
    pending attempts are given up, and a ``webhook.disabled`` event in the
    account's feed tells its other endpoints."""
    hours = current_app.config["WEBHOOKS_DISABLE_AFTER_HOURS"]
    now = utcnow()
    webhook.enabled = False
    webhook.disabled_since = webhook.updated_at = now
    webhook.disabled_reason = f"every attempt failed for {hours:g} hours; last: {last_error}"
    db.session.flush()
    deliveries = WebhookDelivery.__table__
    db.session.execute(
        update(deliveries)
        .where(deliveries.c.webhook_id == webhook.id, deliveries.c.status == "pending")
        .values(status="failed", error=GIVEN_UP, next_attempt_at=None, claim=None)
    )
    record_one(webhook.account_id, WEBHOOK_DISABLED, None, data_text(_dump_webhook(webhook)))
