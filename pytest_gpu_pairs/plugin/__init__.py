"""The pytest face of the package: hooks, options, fixtures and terminal output."""
