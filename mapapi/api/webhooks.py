"""Webhook endpoints: where the account's events are delivered, signed."""

from flask import Blueprint, g, request

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema
from ..contract.webhook_schemas import (
    CreatedWebhookSchema,
    DeliverySchema,
    PingSchema,
    WebhookInputSchema,
    WebhookSchema,
)
from ..extensions import db
from ..http.errors import settled
from ..http.etags import check_precondition, checks_own_precondition
from ..http.payload import load_body, load_query, respond
from ..services import webhooks as service

bp = Blueprint("webhooks", __name__)


@bp.get("/webhooks")
@operation(query=PageQuerySchema, response=list_schema("webhooks", WebhookSchema))
def list_webhooks():
    """List the account's webhook endpoints, in creation order (never their secrets)."""
    return respond(paginate(service.listed_webhooks(g.account), load_query()))


@bp.post("/webhooks")
@operation(body=WebhookInputSchema, response=CreatedWebhookSchema, status=201, conflict=True)
def create_webhook():
    """Create a webhook endpoint; its signing secret is shown in this response only."""
    webhook = service.create_webhook(g.account, load_body())
    db.session.commit()
    return respond(webhook)


@bp.get("/webhooks/<webhook_id>")
@operation(response=WebhookSchema)
def get_webhook(webhook_id):
    """Get a webhook endpoint (not its secret)."""
    return respond(service.find_webhook(webhook_id, g.account))


@bp.put("/webhooks/<webhook_id>")
@operation(body=WebhookInputSchema(partial=True), response=WebhookSchema)
@checks_own_precondition
def update_webhook(webhook_id):
    """Update a webhook endpoint; events made while it is disabled are never sent to it."""
    service.find_webhook(webhook_id, g.account)  # an unknown id answers before the body
    # The URL's name lookup may take seconds: done first, then If-Match is
    # compared and the endpoint written in one transaction, under one lock.
    read_data = settled(load_body)
    url_problems = settled(lambda: service.address_problems(read_data()))
    check_precondition(request)
    webhook = service.update_webhook(webhook_id, g.account, read_data(), url_problems())
    db.session.commit()
    return respond(webhook)


@bp.delete("/webhooks/<webhook_id>")
@operation(response=DeletedSchema)
def delete_webhook(webhook_id):
    """Delete a webhook endpoint and its delivery log; nothing more is sent to it."""
    webhook = service.find_webhook(webhook_id, g.account, lock=True)
    db.session.delete(webhook)
    db.session.commit()
    return respond({"id": webhook.id, "deleted": True})


@bp.post("/webhooks/<webhook_id>/ping")
@operation(response=PingSchema, status=202)
def ping_webhook(webhook_id):
    """Send a `ping` event to this endpoint alone, now (it is not in the feed)."""
    delivery = service.ping(service.find_webhook(webhook_id, g.account))
    db.session.commit()
    return respond(delivery)


@bp.get("/webhooks/<webhook_id>/deliveries")
@operation(query=PageQuerySchema, response=list_schema("deliveries", DeliverySchema))
def list_webhook_deliveries(webhook_id):
    """List this endpoint's delivery attempts, newest first."""
    webhook = service.find_webhook(webhook_id, g.account)
    return respond(paginate(service.listed_deliveries(webhook), load_query()))
