"""Multi-rank tests: real processes over gloo; the shared fixtures live in tests/conftest.py."""
