"""The HTTP service: app factory, error envelope, health."""
