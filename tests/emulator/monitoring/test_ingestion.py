"""Monitoring's ingestion in the emulator (emulator/monitoring/), met with the oci SDK's MonitoringClient unmodified:
it takes what the SDK posts, refuses what the service refuses (reserved namespaces, bad names, datapoints over 2
hours old, more than 50 metric streams, an ATOMIC batch with a bad metric) and keeps what it took."""

from __future__ import annotations

import json
import urllib.request

import oci
import pytest

from ocigroup_cli.core.clock import SystemClock
from tests.helpers.service import start_server

MODELS = oci.monitoring.models


def received(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/_emulator/metrics", timeout=5) as answer:
        return json.loads(answer.read())


def _monitoring(api_key, url: str) -> oci.monitoring.MonitoringClient:
    return oci.monitoring.MonitoringClient(
        api_key.config(), signer=api_key.signer(), service_endpoint=url, retry_strategy=oci.retry.NoneRetryStrategy()
    )


def test_the_emulator_takes_what_the_sdk_posts_and_refuses_what_the_service_refuses(api_key, request):
    server = start_server(api_key, SystemClock())
    request.addfinalizer(server.stop)
    client = _monitoring(api_key, server.url)
    now = oci.util.datetime.datetime.now(oci.util.datetime.timezone.utc)

    def metric(name="lag", namespace="ocigroup", dimensions=None, when=now, group=None):
        return MODELS.MetricDataDetails(
            namespace=namespace, compartment_id="ocid1.compartment.oc1..test", name=name, resource_group=group,
            dimensions=dimensions or {"group": "billing"}, datapoints=[MODELS.Datapoint(timestamp=when, value=3.5)],
        )  # fmt: skip

    old = now - oci.util.datetime.timedelta(hours=3)
    batch = [metric(), metric(namespace="oci_streaming"), metric(name="9lives"), metric(dimensions={"g": "x" * 600}),
             metric(when=old), metric(group="1 bad/group"), metric(name="fleet", group="eu-fleet.$1")]  # fmt: skip
    answer = client.post_metric_data(MODELS.PostMetricDataDetails(metric_data=batch)).data
    assert answer.failed_metrics_count == 5
    messages = [f.message for f in answer.failed_metrics]
    assert any("reserved" in m for m in messages) and any("2 hours" in m for m in messages)
    assert any("Invalid resourceGroup '1 bad/group'" in m for m in messages)
    assert [m["name"] for m in received(server.url)] == ["lag", "fleet"]  # NON_ATOMIC: the valid ones were taken
    many = [metric(dimensions={"partition": str(i)}) for i in range(51)]
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        client.post_metric_data(MODELS.PostMetricDataDetails(metric_data=many))
    assert refused.value.status == 400 and "50" in refused.value.message
    atomic = MODELS.PostMetricDataDetails(metric_data=batch[:2], batch_atomicity="ATOMIC")
    with pytest.raises(oci.exceptions.ServiceError):
        client.post_metric_data(atomic)
    assert len(received(server.url)) == 2
