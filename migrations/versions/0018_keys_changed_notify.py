"""A change to ``api_keys`` notifies the channel ``memsys_keys``, so a serving process knows without a query.

Each request without a key used to look the keys up (is there an active one? then anonymous access is closed):
a database trip per request. A statement-level trigger now sends ``NOTIFY memsys_keys`` when the table changes
(insert, update, delete, truncate: a key made by ``memsys keys create`` or by hand in psql alike), delivered at
commit; ``app.tenancy.watch`` listens, and only while it listens does a request without a key skip the look-up.

On Citus ``api_keys`` is a reference table whose triggers would fire on the shards of every node, not where the
service listens: the trigger is not made there, the watch finds none and every request looks the keys up as
before.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

CHANNEL = "memsys_keys"
TRIGGER = "api_keys_notify"


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    if _citus():
        return
    op.execute(
        f"""
        CREATE FUNCTION api_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys "
        "FOR EACH STATEMENT EXECUTE FUNCTION api_keys_notify()"
    )


def downgrade() -> None:
    op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON api_keys")
    op.execute("DROP FUNCTION IF EXISTS api_keys_notify()")
