"""The ``memsys`` command: serve, migrate, db-url."""

from __future__ import annotations

import argparse
import logging
import sys

from app.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsys", description="Long-term memory for LLM agents on PostgreSQL")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default=None, help="address to bind (default MEMSYS_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default MEMSYS_PORT or 1995)")
    commands.add_parser("migrate", help="apply the database migrations (alembic upgrade head)")
    commands.add_parser("db-url", help="print the database URL (starts the embedded server if needed)")
    args = parser.parse_args(argv)

    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return _serve(settings, args.host or settings.host, args.port or settings.port)
    if args.command == "migrate":
        return _migrate(settings)
    return _db_url(settings)


def _serve(settings: Settings, host: str, port: int) -> int:
    import uvicorn

    from app.http.app import create_app

    uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.log_level.lower())
    return 0


def _migrate(settings: Settings) -> int:
    from app.db import migrate
    from app.db.engine import resolve_database_url

    url = resolve_database_url(settings)
    migrate.upgrade(url, settings.embedding_dimensions)
    print("migrated to head")
    return 0


def _db_url(settings: Settings) -> int:
    from app.db.embedded import libpq_url
    from app.db.engine import resolve_database_url

    print(libpq_url(resolve_database_url(settings, keep_running=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
