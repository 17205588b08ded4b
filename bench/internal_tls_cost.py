"""internal-tls-cost: what mutual TLS between gateway and shards costs KIP-848 heartbeats.

The e2e-heartbeat load (``bench/e2e_heartbeat.py``) against ``groupcoord up`` with its
throwaway CA (mutual TLS on every shard gRPC port, the default) and with ``--no-internal-tls``
(the baseline), in the same run. One run of each is too noisy on a 2-core machine to show a
10 % difference (single runs of either spread by ±25 %), so the two alternate in ABBA pairs —
plaintext, TLS, TLS, plaintext, … — so that a drift of the machine over the run falls on both
alike; the figures are the medians of each side and the median of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics

NAME = "internal-tls-cost"
DESCRIPTION = "heartbeats/s and p99 with gateway-shard mutual TLS over plaintext, ABBA pairs in one run"


def run(args: list[str]) -> dict[str, object]:
    from e2e_heartbeat import add_cluster_options, add_load_options, measure  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    add_load_options(parser)
    add_cluster_options(parser)
    parser.add_argument("--pairs", type=int, default=3, help="ABBA pairs (each: one run per side)")
    opts = parser.parse_args(args)
    load_before = os.getloadavg()
    runs: dict[bool, list[dict[str, object]]] = {False: [], True: []}
    for pair in range(opts.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        for tls in order:
            runs[tls].append(measure(opts, [] if tls else ["--no-internal-tls"]))
    load_after = os.getloadavg()

    def figures(side: list[dict[str, object]]) -> dict[str, object]:
        rates = [float(r["heartbeats_per_s"]) for r in side]
        p99s = [float(r["p99_ms"]) for r in side]
        return {
            "heartbeats_per_s": rates,
            "p99_ms": p99s,
            "median_heartbeats_per_s": round(statistics.median(rates)),
            "median_p99_ms": round(statistics.median(p99s), 1),
        }

    plain, tls = figures(runs[False]), figures(runs[True])
    pair_ratios = [
        round(float(t["heartbeats_per_s"]) / max(1.0, float(p["heartbeats_per_s"])), 3)
        for p, t in zip(runs[False], runs[True], strict=True)
    ]
    return {
        "load": {"groups": opts.groups, "members": opts.members, "seconds": opts.seconds, "window": opts.window},
        "baseline_plaintext": plain,
        "mutual_tls": tls,
        "ratios": {
            "heartbeats_per_s_tls_over_plaintext_median": round(
                tls["median_heartbeats_per_s"] / max(1, plain["median_heartbeats_per_s"]), 3
            ),
            "p99_tls_over_plaintext_median": round(tls["median_p99_ms"] / plain["median_p99_ms"], 3)
            if plain["median_p99_ms"]
            else None,
            "per_pair_heartbeats_per_s": pair_ratios,
            "median_per_pair_heartbeats_per_s": statistics.median(pair_ratios),
        },
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }
