"""Observability: Prometheus metrics (``GET /metrics``)."""
