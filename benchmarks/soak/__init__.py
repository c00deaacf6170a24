"""The soak and fault-injection benchmark (``python -m benchmarks.soak``; the run itself is in ``harness.py``):
``memsys`` processes (``memsys.py``), the clients (``load.py``), the faults (``faults.py``), and the figures and
invariants read from the database (``checks.py``)."""
