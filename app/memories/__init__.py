"""Memories: the rows formation writes and retrieval reads (one table for every memory type)."""
