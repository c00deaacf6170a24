"""The formation queue: procrastinate 3.10.0's schema (its procrastinate/sql/schema.sql, copied next to this
file; the newest procrastinate migration it includes is 03.04.00_50_post_add_retry_failed_job_procedure),
and what the service's role needs of it; ``messages.flush_requested`` (a flush or the idle close asks the
worker to close everything pending). A later procrastinate release gets a revision of its own with the
migration scripts it adds.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from pathlib import Path

from alembic import op

from app.db.roles import quoted_role_in_migration

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
TABLES = ("procrastinate_jobs", "procrastinate_events", "procrastinate_periodic_defers", "procrastinate_workers")
SEQUENCES = ("procrastinate_jobs_id_seq", "procrastinate_events_id_seq", "procrastinate_periodic_defers_id_seq")
FUNCTIONS = (
    "procrastinate_defer_jobs_v1(procrastinate_job_to_defer_v1[])",
    "procrastinate_defer_periodic_job_v2(character varying, character varying, character varying, character varying, integer, character varying, bigint, jsonb)",
    "procrastinate_fetch_job_v2(character varying[], bigint)",
    "procrastinate_finish_job_v1(bigint, procrastinate_job_status, boolean)",
    "procrastinate_cancel_job_v1(bigint, boolean, boolean)",
    "procrastinate_retry_job_v1(bigint, timestamp with time zone, integer, character varying, character varying)",
    "procrastinate_retry_job_v2(bigint, timestamp with time zone, integer, character varying, character varying)",
    "procrastinate_notify_queue_job_inserted_v1()",
    "procrastinate_notify_queue_abort_job_v1()",
    "procrastinate_trigger_function_status_events_insert_v1()",
    "procrastinate_trigger_function_status_events_update_v1()",
    "procrastinate_trigger_function_scheduled_events_v1()",
    "procrastinate_trigger_abort_requested_events_procedure_v1()",
    "procrastinate_unlink_periodic_defers_v1()",
    "procrastinate_register_worker_v1()",
    "procrastinate_unregister_worker_v1(bigint)",
    "procrastinate_update_heartbeat_v1(bigint)",
    "procrastinate_prune_stalled_workers_v1(double precision)",
)
TYPES = ("procrastinate_job_to_defer_v1", "procrastinate_job_event_type", "procrastinate_job_status")


def upgrade() -> None:
    sql = (Path(__file__).parent / "procrastinate_3_10_0_schema.sql").read_text()
    op.get_bind().exec_driver_sql(sql.replace("%", "%%"))  # psycopg parses % even without parameters
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TABLES)} TO {quoted_role_in_migration()}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE {', '.join(SEQUENCES)} TO {quoted_role_in_migration()}")
    op.execute("ALTER TABLE messages ADD COLUMN flush_requested boolean NOT NULL DEFAULT false")


def downgrade() -> None:
    op.execute("ALTER TABLE messages DROP COLUMN flush_requested")
    # fetch_job returns the row type of procrastinate_jobs; the trigger functions are used by its triggers
    op.execute(f"DROP FUNCTION {FUNCTIONS[2]}")
    op.execute(f"DROP TABLE {', '.join(TABLES)}")  # triggers and indexes go with them
    op.execute(f"DROP FUNCTION {', '.join(f for i, f in enumerate(FUNCTIONS) if i != 2)}")
    for t in TYPES:
        op.execute(f"DROP TYPE {t}")
