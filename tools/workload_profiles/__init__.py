"""The workload_profiles study's scripts (see reports/reference/workload_profiles/README.md)."""
