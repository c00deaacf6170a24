"""Memory formation: boundary detection over a stream's pending messages, MemCells, and extraction."""
