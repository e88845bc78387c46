"""HTTP layer: routing, request handlers and middleware."""
