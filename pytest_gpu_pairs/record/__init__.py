"""The one typed result record: its keys, how it is built, checked and stored."""
