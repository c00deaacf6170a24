"""Text handling shared by formation and retrieval: tokenisation for BM25, token counts, times."""
