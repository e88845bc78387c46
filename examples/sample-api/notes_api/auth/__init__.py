"""Authentication: user accounts and signed access tokens."""
