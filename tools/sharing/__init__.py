"""The sharing study's scripts (see reports/reference/sharing/README.md)."""
