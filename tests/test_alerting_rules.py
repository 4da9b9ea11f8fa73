"""docs/alerting.md's Prometheus rules file, as written: the metric names it uses are ones the exposition has,
`promtool check rules` accepts it, and `promtool test rules` shows each alert firing on the series it watches (the
exporter-down ones included: a watch that died, or answers 503, is itself an alert). promtool runs where it is
installed, or `make test` unpacked from Debian's `prometheus` package; the name checks always run."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from ocigroup_cli.core.metrics import FAMILIES
from tests.helpers.prom import alerting_rules

UNIT = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'ocigroup_consumergroup_group_lag_seconds{group="billing",stream="orders"}'
        values: '1000x10'
      - series: 'ocigroup_consumergroup_health{group="billing",stream="orders"}'
        values: '3x10'
      - series: 'up{job="ocigroup",instance="watch:9308"}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 6m
        alertname: BillingLagging
        exp_alerts:
          - exp_labels: {group: billing}
            exp_annotations: {summary: "billing is 16m 40s behind"}
      - eval_time: 3m
        alertname: BillingUnhealthy
        exp_alerts:
          - exp_labels: {group: billing}
            exp_annotations: {summary: "billing's health is ERROR (see ocigroup inspect billing --health)"}
      - eval_time: 3m
        alertname: OcigroupExporterDown
        exp_alerts:
          - exp_labels: {job: ocigroup, instance: "watch:9308"}
            exp_annotations: {summary: "the ocigroup watch on watch:9308 is down or its figures are stale (503)"}
      - eval_time: 6m
        alertname: OcigroupExporterAbsent
        exp_alerts: []
  - interval: 1m
    input_series: []
    alert_rule_test:
      - eval_time: 6m
        alertname: OcigroupExporterAbsent
        exp_alerts:
          - exp_labels: {job: ocigroup}
            exp_annotations: {summary: "no ocigroup scrape target at all: the watch is not running or not scraped"}
"""


def test_the_rules_name_metrics_the_exposition_has():
    names = {f.prom for f in FAMILIES.values()} | {"up"}
    exprs = [rule["expr"] for group in yaml.safe_load(alerting_rules())["groups"] for rule in group["rules"]]
    used = {name for expr in exprs for name in re.findall(r"\b(ocigroup_\w+|up)\b(?=\{)", expr)}
    assert used and used <= names, used - names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_loads_the_rules_and_each_alert_fires(tmp_path):
    (tmp_path / "rules.yml").write_text(alerting_rules())
    checked = subprocess.run(["promtool", "check", "rules", "rules.yml"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert checked.returncode == 0 and "SUCCESS: 4 rules found" in checked.stdout, checked.stdout + checked.stderr
    (tmp_path / "unit.yml").write_text(UNIT)
    tested = subprocess.run(["promtool", "test", "rules", "unit.yml"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
