"""Integrations of memsys with agent frameworks; each imports its framework only when it is imported."""
