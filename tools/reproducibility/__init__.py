"""The reproducibility study's scripts (see reports/reference/reproducibility/README.md)."""
