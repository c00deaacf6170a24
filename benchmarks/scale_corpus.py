"""Synthetic memories for the scale benchmark: realistic sentences, thousands of users and groups, and
384-dimensional vectors with the structure of real embeddings, loaded with COPY.

Embedding a million texts with MiniLM on a 2-core CPU takes hours, so the vectors are made cheaply:
a few thousand *anchor* sentences (template + topic + place + ...) are embedded for real with the bundled
all-MiniLM-L6-v2; each memory instantiates one anchor with its own people and days, and its vector is a
noisy mixture of that anchor's embedding (weight 0.85) and a second anchor's (0.3), plus Gaussian noise
(sigma 0.025 per dimension), normalised. A memory is then about 0.8 cosine from its anchor, related
memories cluster as real ones do, and queries (real MiniLM embeddings of questions about an anchor) find
them by meaning. The text carries the anchor's words (for BM25) and its own names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from app.text.tokenize import tokenize

FIRST_NAMES = (
    "Alice Bob Carol David Emma Frank Grace Henry Isabel Jack Karen Liam Maria Noah Olivia Peter Quinn Rachel "
    "Samuel Tina Umar Victor Wendy Xavier Yara Zoe Ahmed Beatriz Chen Dmitri Elena Farid Giulia Hiro Ingrid "
    "Jamal Keiko Lars Mei Nikolai Omar Priya Rafael Sofia Tomas Ursula Vikram Wei Yusuf Zainab Anna Ben Clara "
    "Daniel Eva Felix Hanna Ivan Julia Kai Lena Marco Nina Oscar Paula Ravi Sara Theo Uma Vera Will Xin Yuki"
).split()
PLACES = (
    "Berlin Paris London Madrid Rome Lisbon Vienna Prague Warsaw Oslo Stockholm Helsinki Dublin Amsterdam "
    "Brussels Zurich Geneva Munich Hamburg Milan Barcelona Athens Istanbul Cairo Nairobi Lagos Dubai Mumbai "
    "Delhi Bangalore Singapore Bangkok Jakarta Manila Tokyo Osaka Seoul Beijing Shanghai Shenzhen Sydney "
    "Melbourne Auckland Toronto Montreal Vancouver Chicago Boston Seattle Denver Austin Miami Lima Bogota"
).split()
ADJECTIVES = (
    "quarterly annual new delayed urgent internal public mobile backend frontend marketing security cloud "
    "customer partner regional weekly monthly experimental legacy"
).split()
NOUNS = (
    "budget review|release plan|product launch|database migration|hiring process|sales forecast|design "
    "system|onboarding guide|pricing model|support backlog|roadmap|data pipeline|tax filing|board meeting|"
    "team offsite|code audit|vendor contract|office move|training course|user survey|bug bash|api "
    "redesign|cost report|incident postmortem|feature flag|analytics dashboard|payment integration|search "
    "ranking|mobile app|newsletter"
).split("|")
FOODS = (
    "roast duck|sushi|tacos|ramen|pizza|dumplings|curry|paella|falafel|pho|croissants|barbecue|hot pot|"
    "pasta|kimchi stew"
).split("|")
HOBBIES = (
    "hiking|climbing|chess|painting|running|cycling|photography|gardening|swimming|yoga|cooking|guitar|"
    "reading novels|board games|skiing"
).split("|")
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()

# {a} and {b} are people, filled per memory; the other slots are fixed per anchor.
TEMPLATES = (
    "{a} and {b} discussed the {topic} during the call and agreed to revisit it in {month}.",
    "{a} said the {topic} must be finished before {weekday}, otherwise the {place} team is blocked.",
    "{a} is worried about the {topic} because the numbers from {place} look wrong.",
    "{a} presented the {topic} to the {place} office and {b} asked for a shorter timeline.",
    "{a} moved the deadline of the {topic} to {month} after talking with {b}.",
    "{a} travelled to {place} for the {topic} and loved the {food} there.",
    "{a} recommends the {food} place near the {place} office to everyone in the team.",
    "{a} prefers {food} over {food2} and goes {hobby} every {weekday}.",
    "{a} started {hobby} in {place} last {month} and invited {b} to join.",
    "{a} told {b} that the {topic} is the top priority for the {place} office this {month}.",
    "{a} asked {b} to review the {topic} document and send comments by {weekday}.",
    "{a} will be in {place} in {month} for a conference and wants to try {food}.",
    "{a} complained that the {topic} meetings take too long and suggested a {weekday} sync instead.",
    "{a} and {b} celebrated the end of the {topic} with {food} in {place}.",
    "{a} is allergic to peanuts and avoids {food} at team dinners in {place}.",
    "{a} plans a {hobby} weekend near {place} with {b} in {month}.",
)
QUESTIONS = (
    "what did we decide about the {topic}",
    "when is the {topic} due",
    "who travelled to {place} for the {topic}",
    "{topic} problems in {place}",
    "where to eat {food} near the {place} office",
    "what does {a} like to eat",
    "{hobby} plans in {place}",
    "deadline of the {topic}",
)


@dataclass
class Anchor:
    template: str
    slots: dict[str, str]

    def render(self, a: str, b: str) -> str:
        return self.template.format(a=a, b=b, **self.slots)


def make_anchors(count: int, rng: np.random.Generator) -> list[Anchor]:
    anchors = []
    for _ in range(count):
        topic = f"{ADJECTIVES[rng.integers(len(ADJECTIVES))]} {NOUNS[rng.integers(len(NOUNS))]}"
        food, food2 = rng.choice(FOODS, size=2, replace=False)
        slots = {
            "topic": topic,
            "place": PLACES[rng.integers(len(PLACES))],
            "food": str(food),
            "food2": str(food2),
            "hobby": HOBBIES[rng.integers(len(HOBBIES))],
            "weekday": WEEKDAYS[rng.integers(7)],
            "month": MONTHS[rng.integers(12)],
        }
        anchors.append(Anchor(TEMPLATES[rng.integers(len(TEMPLATES))], slots))
    return anchors


def question(anchor: Anchor, rng: np.random.Generator) -> str:
    return QUESTIONS[rng.integers(len(QUESTIONS))].format(a=FIRST_NAMES[rng.integers(len(FIRST_NAMES))], **anchor.slots)


@dataclass
class Corpus:
    anchors: list[Anchor]
    anchor_vectors: np.ndarray
    users: int
    groups: int
    size: int
    seed: int

    @property
    def anchor_weights(self) -> np.ndarray:
        """Some subjects come up far more often than others (p ~ 1 / (rank + 10)^0.9)."""
        weights = 1.0 / (np.arange(len(self.anchors)) + 10.0) ** 0.9
        return weights / weights.sum()


def user_groups(user: int, groups: int) -> tuple[int, int]:
    """Every user belongs to two groups."""
    return user % groups, (user * 7 + 3) % groups


def rows(corpus: Corpus, start: int, stop: int, memcell_id, now: datetime):
    """The COPY rows of memories [start, stop), deterministic in (seed, start)."""
    rng = np.random.default_rng([corpus.seed, start])
    n = stop - start
    anchors = rng.choice(len(corpus.anchors), size=n, p=corpus.anchor_weights)
    seconds = rng.uniform(0, 730 * 86400, size=n)
    users = rng.integers(corpus.users, size=n)
    kinds = rng.random(size=n)
    vectors = (
        0.85 * corpus.anchor_vectors[anchors]
        + 0.3 * corpus.anchor_vectors[rng.integers(len(corpus.anchors), size=n)]
        + rng.normal(scale=0.025, size=(n, corpus.anchor_vectors.shape[1]))
    ).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    type_draw = rng.random(size=n)
    for i in range(n):
        anchor = corpus.anchors[anchors[i]]
        user = int(users[i])
        g1, g2 = user_groups(user, corpus.groups)
        if kinds[i] < 0.10:
            user_id, group_id = f"user{user}", None  # personal stream
        elif kinds[i] < 0.15:
            user_id, group_id = None, f"group{g1}"  # group-level memory
        else:
            user_id, group_id = f"user{user}", f"group{g1 if kinds[i] < 0.6 else g2}"
        a = FIRST_NAMES[(user * 31 + i) % len(FIRST_NAMES)]
        b = FIRST_NAMES[(user * 17 + 3 * i + 1) % len(FIRST_NAMES)]
        content = anchor.render(a, b)
        memory_type = "episode" if type_draw[i] < 0.5 else "event_log" if type_draw[i] < 0.85 else "semantic_memory"
        timestamp = now - timedelta(seconds=float(seconds[i]))
        valid_from = valid_to = None
        if memory_type == "semantic_memory" and type_draw[i] > 0.95:
            valid_from, valid_to = timestamp.date(), (timestamp + timedelta(days=180)).date()
        yield (
            memory_type,
            user_id,
            group_id,
            memcell_id,
            [f"msg{start + i}"],
            content,
            timestamp,
            valid_from,
            valid_to,
            " ".join(tokenize(content)),
            vectors[i],
            EMBEDDING_MODEL,
        )


COPY_COLUMNS = (
    "memory_type, user_id, group_id, memcell_id, source_message_ids, content, timestamp, valid_from, valid_to, "
    "search_tokens, embedding, embedding_model"
)
COPY_TYPES = ["text", "text", "text", "uuid", "text[]", "text", "timestamptz", "date", "date", "text", "vector", "text"]
EMBEDDING_MODEL = "local:all-MiniLM-L6-v2"  # the vectors are built from its embeddings, the server queries with it


# Dropped before the load and built after it (same names and definitions as the migrations).
def load(
    url: str,
    corpus: Corpus,
    now: datetime,
    batch: int = 50_000,
    log=print,
    rows_of=rows,
    columns: tuple[str, list[str]] = (COPY_COLUMNS, COPY_TYPES),
) -> dict[str, float]:
    """COPY the corpus in (binary), indexes dropped during the load and rebuilt after; returns timings. ``rows_of``:
    ``rows`` or another maker of COPY rows from the same arguments, of ``columns`` (names, types):
    ``benchmarks/peers_scale.py``'s, which adds the cross-lingual vector."""
    import psycopg
    from pgvector.psycopg import register_vector

    timings: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        # The corpus belongs to the tenant 'default' (new rows take the setting as their tenant_id).
        conn.execute("SET memsys.tenant_id = 'default'")
        # The migrations' own index definitions, dropped for the load and rebuilt after it; not the MemCell one,
        # by which the insert trigger finds a participant episode's group copy (migration 0020).
        indexes = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories' "
                "AND indexname NOT IN ('pk_memories', 'ix_memories_tenant_id_memcell_id')"
            ).fetchall()
        )
        for name in indexes:
            conn.execute(f"DROP INDEX IF EXISTS {name}")
        memcell_id = conn.execute(
            "INSERT INTO memcells (stream_kind, stream_id, group_id, start_time, end_time, message_ids, "
            "participants, boundary_reason, extraction_mode) VALUES ('group', 'bench', 'bench', now(), now(), "
            "'{}', '{}', 'benchmark', 'offline') RETURNING id"
        ).fetchone()[0]
        started = time.perf_counter()
        for start in range(0, corpus.size, batch):
            stop = min(corpus.size, start + batch)
            with conn.cursor().copy(f"COPY memories ({columns[0]}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(columns[1])
                for row in rows_of(corpus, start, stop, memcell_id, now):
                    copy.write_row(row)
            log(f"  loaded {stop:,} memories ({time.perf_counter() - started:.0f} s)")
        timings["copy_s"] = round(time.perf_counter() - started, 1)
        for name, ddl in indexes.items():
            began = time.perf_counter()
            conn.execute(ddl)
            timings[f"{name}_s"] = round(time.perf_counter() - began, 1)
            log(f"  built {name} in {timings[f'{name}_s']} s")
        began = time.perf_counter()
        conn.execute("VACUUM ANALYZE memories")
        conn.execute("ANALYZE bm25_term_stats")
        conn.execute("ANALYZE bm25_corpus_stats")
        timings["vacuum_analyze_s"] = round(time.perf_counter() - began, 1)
    return timings


def build(size: int, users: int, groups: int, anchors: int, seed: int, embed) -> Corpus:
    rng = np.random.default_rng(seed)
    anchor_list = make_anchors(anchors, rng)
    texts = [anchor.render("Alex", "Sam") for anchor in anchor_list]
    vectors = np.asarray(embed(texts), dtype=np.float32)
    return Corpus(anchor_list, vectors, users, groups, size, seed)


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
