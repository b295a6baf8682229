"""The parts of ``benchmarks/run.py``: data, scenarios, servers, load, report."""
