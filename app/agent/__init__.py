"""The ReAct retrieval agent (seed 003): an LLM with memory tools, its context compacted and compressed."""
