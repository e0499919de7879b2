"""Running cases: the session, the case runner, rounds, supervised jobs and sharing."""
