"""memsys: a long-term memory engine for LLM agents on one PostgreSQL."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The source tree: ``migrations/`` and ``sql/`` live beside ``app/``."""
