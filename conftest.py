"""Repository-level defaults only: the plugin itself is registered through its pytest11 entry point."""
