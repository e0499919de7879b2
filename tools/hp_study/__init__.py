"""The hp_study study's scripts (see reports/reference/hp_study/README.md)."""
