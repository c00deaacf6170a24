"""Tenants and API keys, and the one place that puts a transaction in a tenant (``SET LOCAL``)."""
