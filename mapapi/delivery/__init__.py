"""Webhook delivery: the address guard, signing, sending, the queue of
attempts in the database and the worker loop that runs them."""
