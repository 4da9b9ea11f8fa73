"""OCI Monitoring's ingestion: PostMetricData, validated as the service does, kept for tests and rehearsals to read.
Imports the emulator's `shared/` and `ocigroup_cli.core`; no other service."""
