"""Message intake: validation, durable storage in the messages buffer, idempotency."""
