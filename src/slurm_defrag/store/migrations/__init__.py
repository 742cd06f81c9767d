"""Alembic migration environment, shipped inside the package (see migrations/README.md)."""
