"""Settings in: the schema, loading and cross-checks, case expansion and designs."""
