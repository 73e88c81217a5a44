"""Errors meant for the user: the message names what is wrong and what to do."""


class UserError(Exception):
    """Bad input: a clear message, no stored row changed."""


class StoreError(UserError):
    """The database cannot be used as asked (not ours, newer schema, corrupt, read-only)."""
