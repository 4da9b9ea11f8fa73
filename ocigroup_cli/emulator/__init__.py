"""The local OCI emulator: three services over a shared core, as the service answers them.

- `shared/`: what every service stands on: signing and auth, errors, the wire format, validation, SQLite
  storage, faults, the service's limits and rate limiter, the options. It imports no service.
- `streaming/`: OCI Streaming (streams, partitions, cursors, consumer groups, work requests).
- `objectstorage/`: the Object Storage an export needs (buckets, objects, multipart uploads, retention rules).
- `monitoring/`: Monitoring's ingestion (PostMetricData).
- `api.py` routes a request to its service, `admin.py` serves the test-mode endpoints, `server.py` is the HTTP
  server that composes them.

A service imports `shared/` and itself, never another service. The emulator imports only `ocigroup_cli.core` from
the rest of this project (never commands/, ops/, client/).
"""
