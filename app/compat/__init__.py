"""EverMemOS-compatible routes (v0 and v1): adapters over memsys's services."""
