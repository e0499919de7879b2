"""The teardown study's scripts (see reports/reference/teardown/README.md)."""
