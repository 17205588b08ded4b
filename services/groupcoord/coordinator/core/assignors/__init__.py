"""Server-side partition assignors for KIP-848 consumer groups (see api.py)."""
