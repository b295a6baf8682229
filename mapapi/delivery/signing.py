"""The Standard Webhooks headers of one attempt, signed with the package
that receivers verify with."""

from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook


def signed_headers(secret: str, event_id: str, body: str, now: float) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` (whole seconds of ``now``) and
    ``webhook-signature`` over ``"{id}.{timestamp}.{body}"``."""
    seconds = int(now)
    signature = Webhook(secret).sign(event_id, datetime.fromtimestamp(seconds, UTC), body)
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(seconds),
        "webhook-signature": signature,
    }
