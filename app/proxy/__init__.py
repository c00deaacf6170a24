"""The OpenAI-compatible memory proxy: ``POST /v1/chat/completions`` with memsys context in, the turn memorized."""
