"""Let full-text matches use their GIN indexes under row-level security.

With row-level security on ``memories``, PostgreSQL evaluates the tenant policy before any condition whose
function is not marked LEAKPROOF, and then cannot use an index for that condition: ``tsv @@ tsquery``
(``ts_match_vq``) is not marked, so every BM25 leg without a selective user or group filter read the whole
table (1.1 s at 1M memories through the service's role, against 19 ms with the GIN index). ``ts_match_vq``
computes a boolean from its two arguments and raises no error that depends on them, so it cannot reveal
another tenant's rows: it is marked LEAKPROOF here.

Only a superuser may mark a function LEAKPROOF. A migration run by another role (a managed PostgreSQL)
leaves it unmarked and logs a warning: memsys stays correct, and unfiltered BM25 is slow on large tenants.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

import logging

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def _superuser() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").scalar())


def upgrade() -> None:
    if _superuser():
        op.execute("ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF")
    else:
        # Since migration 0026 keyword search reads its candidates through a view where the index works anyway.
        log.info("Not a superuser: ts_match_vq stays not LEAKPROOF (keyword search uses tenant_memories, 0026)")


def downgrade() -> None:
    if _superuser():
        op.execute("ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) NOT LEAKPROOF")
