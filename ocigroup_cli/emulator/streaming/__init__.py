"""OCI Streaming as the service behaves: streams and their lifecycle and work requests, partitions and messages,
cursors, consumer groups (reservations, commits, heartbeats), rate limits and retention. Imports the emulator's
`shared/` and `ocigroup_cli.core`; no other service."""
