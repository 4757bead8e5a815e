#!/usr/bin/env python3
"""The dashboard and the alerts against the code and the runbooks.

- Every metric the code defines (crates/inboxed-core/src/metrics.rs, and `inboxed serve`'s
  gauges in crates/inboxed-cli/src/cli/serve/gauges.rs) is documented in docs/metrics.md.
- deploy/grafana/inboxed.json is what deploy/grafana/dashboard.py writes; it has the
  data source, instance, consumer and tenant variables; every query parses (promtool) and
  names only metrics the code exports (or the alert file records); no query reads a summary's
  `quantile` label (durations are histograms).
- Every alert of deploy/prometheus/alerts.yml has a `runbook_url` to its own section of
  docs/runbooks.md, which exists, and every runbook section is an alert's; every alert has a
  unit test in alerts.test.yml that expects it to fire.

`--self-test` runs the checks on copies broken on purpose (a metric the code does not export,
a query that does not parse, an alert without a runbook, one without a test, a metric left out
of the docs) and fails unless each is caught.
"""

import copy
import importlib.util
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/inboxed.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
ALERT_TESTS = ROOT / "deploy/prometheus/alerts.test.yml"
RUNBOOKS = ROOT / "docs/runbooks.md"
METRICS_DOC = ROOT / "docs/metrics.md"
# Where the metric names are defined, as string constants.
DEFINITIONS = [
    ROOT / "crates/inboxed-core/src/metrics.rs",
    ROOT / "crates/inboxed-cli/src/cli/serve/gauges.rs",
]
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "rate", "increase", "irate",
    "histogram_quantile", "time", "and", "or", "unless", "offset", "le", "label_values",
}


def exported_metrics():
    """Metric names the code defines: the `"inboxed_…"` constants of DEFINITIONS."""
    names = set()
    for source in DEFINITIONS:
        names.update(re.findall(r'"(inboxed_[a-z0-9_]+)"', source.read_text()))
    return names


def check_documented(exported, doc):
    documented = set(re.findall(r"`(inboxed_[a-z0-9_]+)`", doc))
    return [f"{name} is not documented in docs/metrics.md" for name in sorted(exported - documented)]


def recorded_rules(alerts):
    return {r["record"] for g in alerts["groups"] for r in g["rules"] if "record" in r}


def metric_names(expr):
    """The metric names a query reads: identifiers before a selector or a range, not
    functions, keywords or labels."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "{}", without_strings)
    without_groupings = re.sub(r"\b(by|without)\s*\([^)]*\)", "", without_labels)
    found = re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_groupings)
    return {
        name for name in found
        if name not in PROMQL_WORDS and not re.fullmatch(r"\d+[smhdwy]?|e\d+", name)
        and (name.startswith("inboxed") or ":" in name)
    }


def known(name, exported, recorded):
    if name in recorded:
        return True
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return name in exported or base in exported


def parses(exprs):
    """The queries promtool cannot parse, with its message."""
    concrete = [
        e.replace("$__rate_interval", "5m").replace("$__range", "1h")
        .replace("$instance", ".*").replace("$consumer", ".*").replace("$tenant", ".*")
        for e in exprs
    ]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(concrete)
    ]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump(rules, f)
        path = f.name
    done = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    pathlib.Path(path).unlink()
    return [] if done.returncode == 0 else [done.stdout + done.stderr]


def check_dashboard(board, exported, recorded):
    problems = []
    variables = {v["name"] for v in board.get("templating", {}).get("list", [])}
    for wanted in ("datasource", "instance", "consumer", "tenant"):
        if wanted not in variables:
            problems.append(f"the dashboard has no {wanted} variable")
    exprs = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            exprs.append(expr)
            for name in metric_names(expr):
                if not known(name, exported, recorded):
                    problems.append(f"panel {panel['title']!r} reads {name}, which the code does not export")
            if "quantile=" in expr.replace(" ", ""):
                problems.append(f"panel {panel['title']!r} reads a summary's quantile: {expr}")
    problems += [f"a dashboard query does not parse: {p}" for p in parses(exprs)]
    return problems


def check_alerts(alerts, tests, runbooks, exported, recorded):
    problems = []
    sections = set(re.findall(r"^## (\w+)\s*$", runbooks, re.MULTILINE))
    fired = set()
    for group in tests.get("tests", []):
        for case in group.get("alert_rule_test", []):
            if case.get("exp_alerts"):
                fired.add(case["alertname"])
    names = set()
    for group in alerts["groups"]:
        for rule in group["rules"]:
            for name in metric_names(rule["expr"]):
                if not known(name, exported, recorded):
                    problems.append(f"{rule.get('alert') or rule.get('record')} reads {name}, which the code does not export")
            if "alert" not in rule:
                continue
            alert = rule["alert"]
            names.add(alert)
            url = rule.get("annotations", {}).get("runbook_url")
            if url != f"docs/runbooks.md#{alert.lower()}":
                problems.append(f"{alert}: runbook_url {url!r}, not docs/runbooks.md#{alert.lower()}")
            if alert not in sections:
                problems.append(f"{alert}: no section '## {alert}' in docs/runbooks.md")
            if alert not in fired:
                problems.append(f"{alert}: no test in alerts.test.yml expects it to fire")
    for orphan in sorted(sections - names):
        problems.append(f"docs/runbooks.md has a section for {orphan}, which is no alert")
    return problems


def generated():
    spec = importlib.util.spec_from_file_location("dashboard", ROOT / "deploy/grafana/dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render()


def run():
    exported = exported_metrics()
    alerts = yaml.safe_load(ALERTS.read_text())
    recorded = recorded_rules(alerts)
    problems = check_documented(exported, METRICS_DOC.read_text())
    if len(exported) < 20:
        problems.append(f"only {len(exported)} metric names found in {DEFINITIONS}")
    if DASHBOARD.read_text() != generated():
        problems.append("deploy/grafana/inboxed.json is not what dashboard.py writes: run it")
    problems += check_dashboard(json.loads(DASHBOARD.read_text()), exported, recorded)
    problems += check_alerts(alerts, yaml.safe_load(ALERT_TESTS.read_text()),
                             RUNBOOKS.read_text(), exported, recorded)
    return problems


def self_test():
    """Each check catches the mistake it exists for."""
    exported = exported_metrics()
    alerts = yaml.safe_load(ALERTS.read_text())
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    runbooks = RUNBOOKS.read_text()
    recorded = recorded_rules(alerts)
    board = json.loads(DASHBOARD.read_text())
    assert not check_dashboard(board, exported, recorded), "the real dashboard passes"
    assert not check_alerts(alerts, tests, runbooks, exported, recorded), "the real alerts pass"

    def caught(problems, what):
        if not problems:
            sys.exit(f"self-test: {what} was not caught")

    unknown = copy.deepcopy(board)
    unknown["panels"][1]["targets"][0]["expr"] = 'rate(inboxed_messages_totl[5m])'
    caught(check_dashboard(unknown, exported, recorded), "a metric the code does not export")
    broken = copy.deepcopy(board)
    broken["panels"][1]["targets"][0]["expr"] = 'sum by (consumer (rate(inboxed_messages_total[5m]))'
    caught(check_dashboard(broken, exported, recorded), "a query that does not parse")
    summary = copy.deepcopy(board)
    summary["panels"][1]["targets"][0]["expr"] = 'inboxed_handler_duration_seconds{quantile="0.99"}'
    caught(check_dashboard(summary, exported, recorded), "a summary's quantile")
    no_tenant = copy.deepcopy(board)
    no_tenant["templating"]["list"] = [v for v in no_tenant["templating"]["list"] if v["name"] != "tenant"]
    caught(check_dashboard(no_tenant, exported, recorded), "a missing variable")
    no_runbook = copy.deepcopy(alerts)
    first = next(r for r in no_runbook["groups"][0]["rules"] if "alert" in r)
    del first["annotations"]["runbook_url"]
    caught(check_alerts(no_runbook, tests, runbooks, exported, recorded), "an alert without a runbook")
    caught(check_alerts(alerts, tests, runbooks.replace(f"## {first['alert']}\n", ""), exported, recorded),
           "an alert whose runbook section is missing")
    untested = copy.deepcopy(tests)
    for group in untested["tests"]:
        group["alert_rule_test"] = [c for c in group.get("alert_rule_test", []) if c["alertname"] != first["alert"]]
    caught(check_alerts(alerts, untested, runbooks, exported, recorded), "an alert without a test")
    doc = METRICS_DOC.read_text()
    assert not check_documented(exported, doc), "the real docs pass"
    caught(check_documented(exported, doc.replace("`inboxed_lag_seconds`", "`lag`")),
           "a metric left out of the docs")
    print("observability.py self-test: every broken copy caught")


if __name__ == "__main__":
    if "--self-test" in sys.argv:
        self_test()
    problems = run()
    for p in problems:
        print(f"observability.py: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("observability.py: the dashboard and the alerts check out")
