#!/usr/bin/env python3
"""Writes inboxed.json, the Grafana dashboard of the whole product, from the rows below.

Run it after changing a panel (`python3 deploy/grafana/dashboard.py`); CI checks that the
committed JSON is what it writes, that every query parses and that every metric it names is
one the code exports (scripts/check/observability.py). Standard library only.

Every query is filtered by the dashboard's variables: `instance`, `consumer`, `tenant` (the
last only on `inboxed serve`'s gauges of a database per tenant). A variable's "All" matches
series without the label too, so one dashboard serves a service, the relays and `serve`.
Durations are quantiles over histogram buckets (`histogram_quantile`), which add up across
replicas.
"""

import json
import pathlib

# Label matchers each kind of series takes.
PROCESS = 'instance=~"$instance", consumer=~"$consumer"'
PROCESS_NO_CONSUMER = 'instance=~"$instance"'
GAUGE = 'instance=~"$instance", consumer=~"$consumer", tenant=~"$tenant"'
GAUGE_NO_CONSUMER = 'instance=~"$instance", tenant=~"$tenant"'


def rate(metric, by, matchers=PROCESS, window="$__rate_interval"):
    return f"sum by ({by}) (rate({metric}{{{matchers}}}[{window}]))"


def quantile(q, metric, by="consumer", matchers=PROCESS):
    return (
        f"histogram_quantile({q}, sum by (le, {by}) "
        f"(rate({metric}_bucket{{{matchers}}}[$__rate_interval])))"
    )


# (row title, [(panel title, unit, [(expr, legend)], description)])
ROWS = [
    (
        "Processor",
        [
            ("Messages settled, by outcome", "ops",
             [(rate("inboxed_messages_total", "consumer, outcome"), "{{consumer}} {{outcome}}")],
             "processed, duplicate, conflict, dead_lettered, already_dead_lettered"),
            ("Dedup hit rate (15 min)", "percentunit",
             [('inboxed:dedup_hit_rate:15m{consumer=~"$consumer"}', "{{consumer}}")],
             "duplicates / (processed + duplicates): a jump is a replay, a collapse after a deploy keys that changed shape"),
            ("Handler time, p50 and p99", "s",
             [(quantile(0.5, "inboxed_handler_duration_seconds"), "p50 {{consumer}}"),
              (quantile(0.99, "inboxed_handler_duration_seconds"), "p99 {{consumer}}")],
             "time inside the handler, across replicas"),
            ("Claim wait, p99", "s",
             [(quantile(0.99, "inboxed_claim_wait_seconds"), "{{consumer}}")],
             "the claim statement, waiting on a concurrent duplicate included"),
            ("Lag from sending to processing, p50 and p99", "s",
             [(quantile(0.5, "inboxed_lag_seconds"), "p50 {{consumer}}"),
              (quantile(0.99, "inboxed_lag_seconds"), "p99 {{consumer}}")],
             "from the broker's (or the producer's) timestamp"),
            ("Deliveries handed back, retries", "ops",
             [(rate("inboxed_failures_total", "consumer, kind"), "requeued {{consumer}} {{kind}}"),
              (rate("inboxed_retries_total", "consumer"), "retried in process {{consumer}}")],
             "kind=store: the database is unreachable; handler: the handler failed transiently"),
            ("Dead letters written", "ops",
             [(rate("inboxed_dead_letters_total", "consumer, reason"), "{{consumer}} {{reason}}")],
             "permanent, attempts_exhausted, conflict, invalid_message"),
        ],
    ),
    (
        "Failure policy",
        [
            ("Kill switch open", "short",
             [(f"max by (consumer) (inboxed_kill_switch_open{{{PROCESS}}})", "{{consumer}}")],
             "1 while a consumer's deliveries are held back: a dependency of the handler is down"),
            ("Kill switch trips", "short",
             [(f"sum by (consumer) (increase(inboxed_kill_switch_trips_total{{{PROCESS}}}[$__range]))",
               "{{consumer}}")],
             "times the switch opened in the range shown"),
            ("Held back by rate limits", "ops",
             [(rate("inboxed_rate_limited_total", "consumer, action"), "{{consumer}} {{action}}")],
             "deferred: handed back with the wait; waited: an in-order delivery waited in place"),
            ("Crash attribution: suspects waiting, time alone", "short",
             [(f"sum by (work) (inboxed_suspects_waiting{{{PROCESS_NO_CONSUMER}}})", "waiting {{work}}"),
              (f"sum by (work) (rate(inboxed_alone_seconds_sum{{{PROCESS_NO_CONSUMER}}}[$__rate_interval]))",
               "share of time alone {{work}}")],
             "suspects of a crash run alone in their scope; a share near 1 means the scope runs one at a time"),
        ],
    ),
    (
        "Store-then-process",
        [
            ("Backlog by status", "short",
             [(f"sum by (consumer, status) (inboxed_inbox_rows{{{GAUGE}}})", "{{consumer}} {{status}}")],
             "pending, processing, dead (inboxed serve)"),
            ("Oldest pending row", "s",
             [(f"max by (consumer) (inboxed_inbox_oldest_pending_age_seconds{{{GAUGE}}})", "{{consumer}}")],
             "how far behind the workers are"),
            ("Rows settled by workers", "ops",
             [(rate("inboxed_rows_total", "consumer, outcome"), "{{consumer}} {{outcome}}")],
             "done, retrying, dead, lost"),
            ("Rows a claim took, p50", "short",
             [(quantile(0.5, "inboxed_claim_batch_size"), "{{consumer}}")], ""),
            ("Claim loops running", "short",
             [(f"max by (consumer) (inboxed_worker_loops{{{PROCESS}}})", "{{consumer}}")],
             "at 1 while the backlog grows: the database is the limit"),
            ("Relay receipts", "ops",
             [(rate("inboxed_receipts_total", "consumer, outcome"), "{{consumer}} {{outcome}}"),
              (rate("inboxed_relay_requeues_total", "consumer"), "handed back {{consumer}}")],
             "stored, duplicate, conflict, invalid; handed back: the relay cannot store"),
            ("Leases expired, dead workers", "short",
             [(f"max by (consumer) (inboxed_inbox_expired_leases{{{GAUGE}}})", "expired, not reaped {{consumer}}"),
              (f"sum (increase(inboxed_leases_expired_total{{{PROCESS_NO_CONSUMER}}}[$__range]))", "reaped"),
              (f"sum (increase(inboxed_dead_workers_total{{{PROCESS_NO_CONSUMER}}}[$__range]))", "dead workers")],
             "claims whose worker died or stalled"),
        ],
    ),
    (
        "Outbox and relays",
        [
            ("Unsent outbox rows", "short",
             [(f"sum by (destination, status) (inboxed_outbox_unsent_rows{{{GAUGE_NO_CONSUMER}}})",
               "{{destination}} {{status}}")],
             "pending, sending, dead (inboxed serve)"),
            ("Oldest unsent row", "s",
             [(f"max by (destination) (inboxed_outbox_oldest_unsent_age_seconds{{{GAUGE_NO_CONSUMER}}})",
               "{{destination}}")],
             "how far behind the relays are"),
            ("Rows confirmed by the broker", "ops",
             [(f"sum by (destination) (inboxed_outbox_sent_per_second{{{GAUGE_NO_CONSUMER}}})", "{{destination}}")],
             "over the last minute (inboxed serve)"),
            ("Rows marked by the relays, by fate", "ops",
             [(rate("inboxed_outbox_rows_total", "fate", PROCESS_NO_CONSUMER), "{{fate}}")],
             "sent, retrying, dead, handed_back (the broker unreachable), lost (a lease shorter than a publish)"),
            ("Outbox rows returned after a relay died, purged", "short",
             [(f"sum (increase(inboxed_outbox_leases_expired_total{{{PROCESS_NO_CONSUMER}}}[$__range]))", "returned"),
              (f"sum (increase(inboxed_outbox_purged_rows_total{{{PROCESS_NO_CONSUMER}}}[$__range]))", "sent rows purged")],
             ""),
        ],
    ),
    (
        "Retention",
        [
            ("Processed keys kept", "short",
             [(f"max by (consumer) (inboxed_processed_keys_estimated{{{GAUGE}}})", "{{consumer}}")], ""),
            ("Processed keys added per hour", "short",
             [(f"max by (consumer) (inboxed_processed_keys_growth_per_hour{{{GAUGE}}})", "{{consumer}}")], ""),
            ("Processed-keys table size", "bytes",
             [(f"max (inboxed_processed_table_bytes{{{GAUGE_NO_CONSUMER}}})", "heap and indexes")], ""),
            ("Oldest kept key against the window and the horizon", "s",
             [(f"max by (consumer) (inboxed_oldest_key_age_seconds{{{GAUGE}}})", "oldest {{consumer}}"),
              (f"max by (consumer) (inboxed_retention_window_seconds{{{PROCESS}}})", "window {{consumer}}"),
              (f"max by (consumer) (inboxed_redelivery_horizon_seconds{{{PROCESS}}})", "horizon {{consumer}}")],
             "the window must stay above the horizon"),
            ("Purged keys", "ops",
             [(rate("inboxed_purged_rows_total", "consumer"), "{{consumer}}")], ""),
            ("Purge pass, p99; failures", "s",
             [(quantile(0.99, "inboxed_purge_pass_seconds", by="instance", matchers=PROCESS_NO_CONSUMER), "pass p99 {{instance}}"),
              (quantile(0.99, "inboxed_partition_drop_seconds", by="instance", matchers=PROCESS_NO_CONSUMER), "partition drop p99 {{instance}}"),
              (f"sum (increase(inboxed_purge_failures_total{{{PROCESS_NO_CONSUMER}}}[$__range]))", "failed passes")],
             ""),
            ("Since the last purge pass that succeeded", "s",
             [(f"time() - max (inboxed_purge_last_success_timestamp_seconds{{{PROCESS_NO_CONSUMER}}})", "age")], ""),
        ],
    ),
    (
        "Database reads (inboxed serve)",
        [
            ("Database readable", "short",
             [(f"min (inboxed_observe_up{{{GAUGE_NO_CONSUMER}}})", "up")],
             "0 when inboxed serve's last read failed"),
            ("Dead letters kept", "short",
             [(f"sum by (consumer, reason) (inboxed_dead_letters{{{GAUGE}}})", "{{consumer}} {{reason}}")], ""),
            ("Read time", "s",
             [(f"max (inboxed_observe_duration_seconds{{{GAUGE_NO_CONSUMER}}})", "last read")], ""),
        ],
    ),
]


def variable(name, label, query):
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def dashboard():
    panels, next_id, y = [], 1, 0
    for row_title, row_panels in ROWS:
        panels.append({
            "id": next_id, "type": "row", "title": row_title, "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": [],
        })
        next_id, y = next_id + 1, y + 1
        for i, (title, unit, targets, description) in enumerate(row_panels):
            panels.append({
                "id": next_id,
                "type": "timeseries",
                "title": title,
                "description": description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
                    for j, (expr, legend) in enumerate(targets)
                ],
            })
            next_id += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    return {
        "title": "inboxed",
        "uid": "inboxed",
        "description": "The whole product: processors, the failure policy, store-then-process, "
                       "the outbox and its relays, retention. Metrics: docs/metrics.md; alerts: "
                       "deploy/prometheus/alerts.yml and docs/runbooks.md.",
        "schemaVersion": 39,
        "version": 2,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "tags": ["inboxed"],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
            variable("instance", "Instance", 'label_values({__name__=~"inboxed_.+"}, instance)'),
            variable("consumer", "Consumer", 'label_values({__name__=~"inboxed_.+"}, consumer)'),
            variable("tenant", "Tenant", 'label_values({__name__=~"inboxed_.+"}, tenant)'),
        ]},
        "panels": panels,
    }


def render():
    return json.dumps(dashboard(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    out = pathlib.Path(__file__).with_name("inboxed.json")
    out.write_text(render())
    print(f"wrote {out}")
