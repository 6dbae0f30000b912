"""PostgreSQL storage for neardup."""
