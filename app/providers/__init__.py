"""Providers of outside services behind small interfaces: LLM, embeddings, rerank."""
