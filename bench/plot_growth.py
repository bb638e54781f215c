#!/usr/bin/env python3
"""Draws docs/growth.png from bench/growth_bench.py's JSON: how the rendezvous daemon's costs grow
with the number of agents, medians per size, log-log, each panel with a line of slope 1 (linear
growth) through its smallest point.

Needs matplotlib (Debian: apt-get install python3-matplotlib); no test runs this script.

Usage: bench/plot_growth.py [--out docs/growth.png] JSON...
(the files' parts are merged: "socket", "socket_scaled_refresh" and "core" from whichever has them)
"""

import argparse
import json
import statistics
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def medians(by_agents, key, scale=1.0):
    xs, ys = [], []
    for agents in sorted(by_agents, key=int):
        values = [s[key] for s in by_agents[agents] if s.get(key) is not None and s[key] >= 0]
        if values:
            xs.append(int(agents))
            ys.append(statistics.median(values) * scale)
    return xs, ys


def panel(ax, title, ylabel, series):
    """series: (label, xs, ys, style)."""
    reference = None
    for label, xs, ys, style in series:
        if not xs:
            continue
        ax.plot(xs, ys, style, label=label)
        if reference is None:
            reference = (xs[0], ys[0])
    if reference:
        x0, y0 = reference
        xs = [x0, 100000]
        ax.plot(xs, [y0 * x / x0 for x in xs], ":", color="grey", label="linear from first point")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("agents")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/growth.png")
    parser.add_argument("json", nargs="+")
    args = parser.parse_args()
    target = args.out
    data = {"socket": {}, "socket_scaled_refresh": {}, "core": {"fixed": {}, "scaled": {}}}
    for source in args.json:
        with open(source) as f:
            part = json.load(f)
        for key in ("socket", "socket_scaled_refresh"):
            data[key].update(part.get(key, {}))
        for rule in ("fixed", "scaled"):
            data["core"][rule].update(part.get("core", {}).get(rule, {}))
        for key in ("cpus", "started"):
            data.setdefault(key, part.get(key))
    sock = data["socket"]
    hooked = data["socket_scaled_refresh"]
    fixed = data["core"]["fixed"]
    scaled = data["core"]["scaled"]

    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    panel(axes[0][0], "Time until every agent has its round", "ms", [
        ("cohortd, sockets (wall)", *medians(sock, "round_ms"), "o-"),
        ("cohortd, scaled refresh (wall)", *medians(hooked, "round_ms"), "D-"),
        ("core, 500 ms refresh (CPU)", *medians(fixed, "form_cpu_ms"), "s--"),
        ("core, scaled refresh (CPU)", *medians(scaled, "form_cpu_ms"), "^-"),
    ])
    panel(axes[0][1], "Daemon CPU until every agent has its round", "CPU s", [
        ("cohortd, sockets", *medians(sock, "daemon_cpu_round_s"), "o-"),
        ("cohortd, scaled refresh", *medians(hooked, "daemon_cpu_round_s"), "D-"),
        ("core, 500 ms refresh", *medians(fixed, "form_cpu_ms", 1e-3), "s--"),
        ("core, scaled refresh", *medians(scaled, "form_cpu_ms", 1e-3), "^-"),
    ])
    panel(axes[0][2], "Daemon memory", "MiB", [
        ("cohortd peak RSS (VmHWM)", *medians(sock, "hwm_kib", 1 / 1024), "o-"),
        ("core: RSS growth to the round", *medians(scaled, "rss_delta_kib", 1 / 1024), "^-"),
    ])
    panel(axes[1][0], "Restart after one worker failure", "ms", [
        ("cohortd, sockets: to every next round (wall)",
         *medians(sock, "failure_to_every_round_ms"), "o-"),
        ("cohortd, sockets: daemon CPU", *medians(sock, "daemon_cpu_restart_s", 1e3), "o--"),
        ("core (CPU)", *medians(scaled, "restart_cpu_ms"), "^-"),
    ])
    panel(axes[1][1], "5 heartbeats from every agent", "daemon CPU ms", [
        ("cohortd, sockets", *medians(sock, "daemon_cpu_heartbeats_s", 1e3), "o-"),
        ("core", *[[x for x in medians(scaled, "heartbeat_cpu_ns")[0]],
                   [y * 5 * x * 1e-6 for x, y in zip(*medians(scaled, "heartbeat_cpu_ns"))]],
         "^-"),
    ])
    panel(axes[1][2], "One status request (lists at most 2,000 nodes)", "ms", [
        ("cohortd, sockets (wall)", *medians(sock, "status_ms_median"), "o-"),
        ("core: every node copied (CPU)", *medians(scaled, "status_cpu_ms_median"), "s--"),
        ("core: listed nodes only (CPU)", *medians(scaled, "status_limited_cpu_ms_median"), "^-"),
    ])
    fig.suptitle(f"cohortd growth, medians ({data.get('cpus', '?')} CPUs, shared machine; "
                 f"{data.get('started', '')})", fontsize=11)
    fig.tight_layout()
    fig.savefig(target, dpi=90)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
