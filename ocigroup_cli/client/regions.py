"""The Streaming service endpoint of any OCI region, in every realm, from the oci SDK's own tables.

The tables are read from the SDK's `regions_definitions.py` without importing the `oci` package (which costs
about 0.2 s), and the region sources the SDK and the `oci` CLI honour are honoured too, in the same order:
`~/.oci/regions-config.json`, then `OCI_REGION_METADATA` (dedicated and new regions), then `OCI_DEFAULT_REALM`.
Unlike the SDK, an unknown region is refused with a suggestion instead of being sent to the commercial realm,
where a typo would only show up as a name that does not resolve.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocigroup_cli.errors import ConfigError

TEMPLATE = "https://streaming.{region}.oci.{domain}"  # StreamAdminClient's service_endpoint_template
TELEMETRY_TEMPLATE = "https://telemetry-ingestion.{region}.{domain}"  # MonitoringClient's, for PostMetricData
OBJECT_STORAGE_TEMPLATE = "https://objectstorage.{region}.{domain}"  # ObjectStorageClient's
METADATA_KEYS = ("realmKey", "realmDomainComponent", "regionKey", "regionIdentifier")
REGIONS_CONFIG = "~/.oci/regions-config.json"


@dataclass
class Tables:
    short_names: dict[str, str] = field(default_factory=dict)  # "iad" -> "us-ashburn-1"
    realms_of: dict[str, str] = field(default_factory=dict)  # "us-ashburn-1" -> "oc1"
    domains: dict[str, str] = field(default_factory=dict)  # "oc1" -> "oraclecloud.com"

    def add(self, metadata: Mapping[str, Any]) -> None:
        """One region described the way the SDK's regions-config.json and OCI_REGION_METADATA describe it."""
        if not all(isinstance(metadata.get(k), str) and metadata[k] for k in METADATA_KEYS):
            return
        realm, domain, key, region = (str(metadata[k]).lower() for k in METADATA_KEYS)
        self.short_names.setdefault(key, region)
        self.realms_of.setdefault(region, realm)
        self.domains.setdefault(realm, domain)


@functools.cache
def sdk_tables() -> Tables:
    """The regions and realms of the installed oci SDK (its data module only, not the package)."""
    spec = importlib.util.find_spec("oci")
    locations = spec.submodule_search_locations if spec else None
    if not locations:
        return Tables()
    path = Path(next(iter(locations))) / "regions_definitions.py"
    loaded = importlib.util.spec_from_file_location("ocigroup_cli.client._oci_regions", path)
    if loaded is None or loaded.loader is None or not path.exists():
        return Tables()
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return Tables(dict(module.REGIONS_SHORT_NAMES), dict(module.REGION_REALMS), dict(module.REALMS))


def _tables(env: Mapping[str, str]) -> Tables:
    base = sdk_tables()
    tables = Tables(dict(base.short_names), dict(base.realms_of), dict(base.domains))
    sources: list[Any] = []
    try:
        listed = json.loads(Path(REGIONS_CONFIG).expanduser().read_text())
        sources += listed if isinstance(listed, list) else []
    except (OSError, ValueError, RuntimeError):
        pass  # no file (or no home), or not JSON: nothing to add, as with the SDK
    try:
        sources.append(json.loads(env.get("OCI_REGION_METADATA") or "null"))
    except ValueError:
        hint = f"it is one JSON object with {', '.join(METADATA_KEYS)}"
        raise ConfigError("OCI_REGION_METADATA is not valid JSON.", hint) from None
    for metadata in sources:
        if isinstance(metadata, dict):
            tables.add(metadata)
    return tables


def streaming_endpoint(region: str, env: Mapping[str, str] | None = None) -> str:
    """The control-plane endpoint of the Streaming service in `region` (a name, a short name, or a domain)."""
    return _endpoint(TEMPLATE, "streaming", region, env)


def telemetry_ingestion_endpoint(region: str, env: Mapping[str, str] | None = None) -> str:
    """Where custom metrics are posted in `region` (PostMetricData): Monitoring's endpoint with `telemetry`
    replaced by `telemetry-ingestion`, as Oracle's documentation says."""
    return _endpoint(TELEMETRY_TEMPLATE, "telemetry-ingestion", region, env)


def object_storage_endpoint(region: str, env: Mapping[str, str] | None = None) -> str:
    """Object Storage's endpoint in `region`."""
    return _endpoint(OBJECT_STORAGE_TEMPLATE, "objectstorage", region, env)


def _endpoint(template: str, service: str, region: str, env: Mapping[str, str] | None) -> str:
    env = os.environ if env is None else env
    name = region.strip().lower()
    if "." in name:  # a full domain, as the SDK allows
        return f"https://{service}.{name}"
    tables = _tables(env)
    name = tables.short_names.get(name, name)
    realm = tables.realms_of.get(name)
    if realm is not None and realm in tables.domains:
        return template.format(region=name, domain=tables.domains[realm])
    if env.get("OCI_DEFAULT_REALM"):
        return template.format(region=name, domain=env["OCI_DEFAULT_REALM"])
    known = sorted(tables.realms_of) + sorted(tables.short_names)
    close = difflib.get_close_matches(name, known, n=1)
    raise ConfigError(
        f"unknown OCI region {region!r}" + (f"; did you mean {close[0]!r}?" if close else "."),
        "fix 'region' in the profile, set 'endpoint', or describe the region in ~/.oci/regions-config.json "
        "or OCI_REGION_METADATA as for the oci CLI",
    )
