"""The OCI Object Storage an export needs: a namespace, buckets, objects (conditional writes, ranges), multipart
uploads, listings and retention rules. Imports the emulator's `shared/` and `ocigroup_cli.core`; no other service."""
