"""The async SQLAlchemy engine, and where the database URL comes from."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.embedded import embedded_database_url, sqlalchemy_url
from app.settings import Settings


def resolve_database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """``MEMSYS_DATABASE_URL`` when set, else the embedded server's URL (started if need be)."""
    if settings.database_url:
        return settings.database_url
    return embedded_database_url(settings.resolved_data_dir(), keep_running=keep_running)


def create_engine(database_url: str, settings: Settings) -> AsyncEngine:
    return create_async_engine(
        sqlalchemy_url(database_url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_pre_ping=True,
        connect_args={"connect_timeout": 10},
    )
