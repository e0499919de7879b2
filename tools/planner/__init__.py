"""The planner study: extended solo profiles, min fits, measured pairs, and the validation (see reports/reference/planner/README.md)."""
