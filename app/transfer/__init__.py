"""Export of what memsys holds (one versioned JSON format)."""
