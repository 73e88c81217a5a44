"""The records and vocabulary every role shares: decisions and configs (`space`), candidates and
process setups (`candidate`), trial statuses (`status`) and the user-facing error (`errors`)."""
