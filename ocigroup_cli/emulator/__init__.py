"""A local OCI Streaming service: data plane plus the admin subset a consumer-group CLI needs.

Imports only `ocigroup_cli.core` from this project (never commands/, ops/, client/).
"""
