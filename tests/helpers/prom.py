"""Expositions read back with prometheus_client's own parsers (the Prometheus text format and OpenMetrics)."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and labels; it must parse as the Prometheus text format and as
    OpenMetrics."""
    assert text.endswith("# EOF\n")
    list(openmetrics_families(text))  # raises on anything OpenMetrics refuses
    found = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge" and family.documentation
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found
