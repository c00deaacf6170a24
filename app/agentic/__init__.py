"""Agentic retrieval: LLM-guided multi-round search with rerank and time awareness."""
