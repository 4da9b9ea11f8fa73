"""The emulator's shared core: signing and auth, errors, the wire format, validation, SQLite storage, faults, the
service's limits and rate limiter, the options. Imports `ocigroup_cli.core` only: no service, nothing above."""
