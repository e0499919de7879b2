"""End-to-end tests: real training of the built-in workloads (torch), whole pipelines on the CPU,
and the report built from the predecessor's real seed data."""
