"""Alembic environment. memsys configures Alembic in code (app.db.migrate), so there is no alembic.ini."""

from alembic import context
from pgvector.sqlalchemy import Vector
from sqlalchemy import create_engine, pool

from app.db.tables import metadata

config = context.config


def _compare_type(ctx, inspected_column, metadata_column, inspected_type, metadata_type):
    # The vector dimension follows the configured embedding model and is checked at start-up
    # (app.db.migrate.check_embedding_dimensions), not by the drift check.
    if isinstance(metadata_type, Vector):
        return False
    return None


def _include_name(name, type_, parent_names) -> bool:
    # procrastinate's tables come from its own SQL (migration 0004), not from app.db.tables.
    return not (type_ == "table" and name and name.startswith("procrastinate_"))


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
        with engine.connect() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connectable)


LOCK_TIMEOUT = "1s"
"""How long a migration's statement waits for a lock before it gives up (app.db.migrate tries again): a statement
that waits for a lock holds up every query that comes after it on that table, searches included."""


def _run(connection) -> None:
    context.configure(
        connection=connection, target_metadata=metadata, compare_type=_compare_type, include_name=_include_name
    )
    connection.exec_driver_sql(f"SET lock_timeout = '{config.attributes.get('lock_timeout', LOCK_TIMEOUT)}'")
    try:
        with context.begin_transaction():
            context.run_migrations()
    finally:
        connection.exec_driver_sql("RESET lock_timeout")


run_migrations_online()
