"""The feasibility study's scripts (see reports/reference/feasibility/README.md)."""
