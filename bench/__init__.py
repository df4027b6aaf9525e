"""Benchmarks (run by hand or `python -m bench`; never as timed assertions in tests)."""
