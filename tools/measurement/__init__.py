"""The measurement study's scripts (see reports/reference/measurement/README.md)."""
