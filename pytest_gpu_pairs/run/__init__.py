"""Running cases: the session and its parts, the methods, the one case wrapper, rounds, supervised jobs and sharing."""
