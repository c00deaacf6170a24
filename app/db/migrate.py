"""Applying the Alembic migrations from code, and the start-up checks of the schema."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from app import PROJECT_ROOT
from app.db.embedded import sqlalchemy_url
from app.errors import ConfigurationError


def alembic_config(database_url: str, embedding_dimensions: int) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    cfg.attributes["embedding_dimensions"] = embedding_dimensions
    return cfg


def upgrade(database_url: str, embedding_dimensions: int, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url, embedding_dimensions), revision)


def downgrade(database_url: str, embedding_dimensions: int, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url, embedding_dimensions), revision)


def check_embedding_dimensions(database_url: str, embedding_dimensions: int) -> None:
    """Refuse to start when the database's vector column was made for another embedding model."""
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute "
                    "WHERE attrelid = to_regclass('memories') AND attname = 'embedding'"
                )
            ).scalar()
    finally:
        engine.dispose()
    if found is not None and found != embedding_dimensions:
        raise ConfigurationError(
            f"The database stores {found}-dimensional embeddings but the configured embedding model gives "
            f"{embedding_dimensions} (MEMSYS_EMBEDDING_DIMENSIONS / MEMSYS_EMBEDDING_MODEL). Use the model the "
            "database was built with, or a new database."
        )
