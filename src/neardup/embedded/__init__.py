"""The embedded PostgreSQL server: a private server's processes, the shared default one, its watchdog."""
