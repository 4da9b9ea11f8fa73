"""IAM as OCI defines it for the calls ocigroup makes (../shared reference: docs/iam.md lists the sources): the
permission each call needs, the policy statement grammar, and the tenancy file the emulator's `--iam` reads.

Pure and self-contained (the standard library and PyYAML): the emulator imports it to authorize each call, the
doctor and the client's error hints to name the narrowest statement that grants what was refused. It imports no
other room of the project."""
