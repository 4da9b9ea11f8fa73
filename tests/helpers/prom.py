"""Expositions read back with prometheus_client's own parsers (the Prometheus text format and OpenMetrics)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

ALERTING = Path(__file__).resolve().parents[2] / "docs" / "alerting.md"


def alerting_rules() -> str:
    """docs/alerting.md's rules file, as written there."""
    return next(b for b in re.findall(r"```yaml\n(.*?)```", ALERTING.read_text(), re.S) if b.startswith("groups:"))


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
