"""Adapters from the predecessor tool's formats to this package's own."""
