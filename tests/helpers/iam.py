"""A tenancy file for the emulator's `--iam` (docs/iam.md): the test key is the administrator's (the SDK helpers
go on working), alice has a key of her own and the statements a test gives her."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.helpers.service import ApiKey, make_key, write_config

TENANCY = "ocid1.tenancy.oc1..aaaaaaaatesttenancy"
ADMIN = "ocid1.user.oc1..aaaaaaaatestuser"
ALICE = "ocid1.user.oc1..alice"
APPS = "ocid1.compartment.oc1..apps"
TEST = "ocid1.compartment.oc1..test"  # where the Sdk helper makes streams and buckets: a child of apps
GROUP = "StreamUsers"


class IamFile:
    def __init__(self, directory: Path, admin: ApiKey) -> None:
        self.directory = directory
        self.path = directory / "iam.yaml"
        (directory / "admin_public.pem").write_bytes(admin.public_pem)
        (directory / "alice").mkdir()
        self.alice = make_key(directory / "alice")
        self.write([])

    def write(self, statements: list[str], attached: str | None = None, alice_keys: list[str] | None = None) -> None:
        """Alice's `statements`, in a policy attached to the tenancy (or compartment `attached`)."""
        doc = {
            "tenancy": TENANCY,
            "compartments": [{"name": "apps", "id": APPS}, {"name": "test", "id": TEST, "parent": "apps"}],
            "users": [
                {"id": ADMIN, "keys": ["admin_public.pem"], "groups": ["Admins"]},
                {
                    "id": ALICE,
                    "keys": alice_keys or [str(Path(self.alice.key_file).parent / "key_public.pem")],
                    "groups": [GROUP],
                },
            ],
            "policies": [{"statements": ["Allow group Admins to manage all-resources in tenancy"]}],
        }
        if statements:
            policy = {"statements": statements, **({"compartment": attached} if attached else {})}
            doc["policies"].append(policy)
        fresh = self.path.with_suffix(".new")
        fresh.write_text(yaml.safe_dump(doc, sort_keys=False))
        fresh.replace(self.path)  # whole, as an editor saves: the emulator never reads half a file

    def profile(self, directory: Path, url: str, key: ApiKey | None = None, **extra) -> str:
        """A profile file for alice (or whoever holds `key`), naming the stream by OCID."""
        key = key or self.alice
        config = write_config(directory, key, url, "alice", **extra)
        doc = yaml.safe_load(Path(config).read_text())
        doc["profiles"]["alice"]["auth"]["user"] = ALICE
        Path(config).write_text(yaml.safe_dump(doc))
        return config
