"""The request-metadata keys gnnstore's client sends beside a call's message."""

RETRY_KEY = "gnnstore-retry"
"""Request-metadata key whose value is the try's number (1, 2, …) when a call is a retry."""
