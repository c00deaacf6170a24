"""Applying the Alembic migrations from code, and the start-up checks of the schema."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app import PROJECT_ROOT
from app.db.embedded import sqlalchemy_url
from app.db.named_sql import statement
from app.errors import ConfigurationError

SERVICE_ROLE = "memsys_app"  # created and granted by migration 0003


def alembic_config(database_url: str, embedding_dimensions: int, embedding_model: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    cfg.attributes["embedding_dimensions"] = embedding_dimensions
    if embedding_model:
        cfg.attributes["embedding_model"] = embedding_model  # what migration 0007 gives the rows already there
    return cfg


def upgrade(
    database_url: str,
    embedding_dimensions: int,
    revision: str = "head",
    *,
    service_url: str | None = None,
    embedding_model: str | None = None,
) -> None:
    """Migrate with the owner's URL; a password in the service's URL of ``memsys_app`` becomes that role's."""
    command.upgrade(alembic_config(database_url, embedding_dimensions, embedding_model), revision)
    if service_url:
        _set_service_password(database_url, service_url)


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None before the first migration)."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def _set_service_password(database_url: str, service_url: str) -> None:
    url = make_url(sqlalchemy_url(service_url))
    if url.username != SERVICE_ROLE or not url.password:
        return
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.begin() as conn:
            quoted = conn.execute(text("SELECT quote_literal(:p)"), {"p": url.password}).scalar_one()
            conn.execute(text(f"ALTER ROLE {SERVICE_ROLE} PASSWORD {quoted}"))
    finally:
        engine.dispose()


def downgrade(database_url: str, embedding_dimensions: int, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url, embedding_dimensions), revision)


def check_embedding_dimensions(database_url: str, embedding_dimensions: int) -> None:
    """Refuse to start when the database's vector column was made for another embedding model."""
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            found = conn.execute(statement("vector_dimensions")).scalar()
    finally:
        engine.dispose()
    if found is not None and found != embedding_dimensions:
        raise ConfigurationError(
            f"The database stores {found}-dimensional embeddings but the configured embedding model gives "
            f"{embedding_dimensions} (MEMSYS_EMBEDDING_DIMENSIONS / MEMSYS_EMBEDDING_MODEL). Use the model the "
            "database was built with, or run `memsys reembed` (with memsys stopped) to embed every memory again."
        )
