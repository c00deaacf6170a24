"""Context assembly under token budgets (seed 002): the messages a caller sends to its LLM."""
