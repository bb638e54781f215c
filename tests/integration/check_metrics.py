"""Strict check of a Prometheus text exposition (format 0.0.4) read from stdin.

Beyond what prometheus_client's parser accepts, it requires: every line a HELP, TYPE or sample
line of the grammar; HELP and TYPE at most once per family and before its samples; a family's
samples together; no series twice; histograms with ascending `le`, cumulative buckets, a +Inf
bucket equal to _count, and _sum. Prints the samples as JSON ({"name{a="x"}": value}) and exits
0, or prints the problems and exits 1. Usage: check_metrics.py < metrics.txt
"""
import json
import math
import re
import sys

from prometheus_client.parser import text_string_to_metric_families

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
VALUE = r"(?:[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|NaN|[-+]Inf)"
SAMPLE = re.compile(rf"^({NAME})(\{{(?:{LABEL}(?:,{LABEL})*)?\}})? ({VALUE})(?: -?[0-9]+)?$")
HELP = re.compile(rf"^# HELP ({NAME}) (.*)$")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$")
SUFFIXES = ("_bucket", "_sum", "_count")


def family_of(name, types):
    for suffix in SUFFIXES:
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return name


def labels_of(text):
    return dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', text or ""))


def check(text):
    problems, samples, types, helps = [], {}, {}, set()
    finished, current, histograms = set(), None, {}
    if not text.endswith("\n"):
        problems.append("the text does not end with a newline")
    for number, line in enumerate(text.splitlines(), 1):
        where = f"line {number}: {line[:80]!r}"
        if match := HELP.match(line):
            if match[1] in helps:
                problems.append(f"{where}: second HELP")
            helps.add(match[1])
            continue
        if match := TYPE.match(line):
            if match[1] in types or match[1] in finished or match[1] == current:
                problems.append(f"{where}: TYPE repeated or after samples")
            types[match[1]] = match[2]
            continue
        match = SAMPLE.match(line)
        if not match:
            problems.append(f"{where}: not a HELP, TYPE or sample line")
            continue
        family = family_of(match[1], types)
        if family != current:
            if family in finished:
                problems.append(f"{where}: family {family} split")
            if current:
                finished.add(current)
            current = family
        key = match[1] + (match[2] or "")
        if key in samples:
            problems.append(f"{where}: series twice")
        samples[key] = float(match[3])
        if types.get(family) == "histogram":
            labels = labels_of(match[2])
            le = labels.pop("le", None)
            series = histograms.setdefault((family, json.dumps(labels, sort_keys=True)), {})
            if match[1].endswith("_bucket"):
                series.setdefault("buckets", []).append((float(le), float(match[3])))
            else:
                series[match[1][len(family) :]] = float(match[3])
    for (family, labels), series in histograms.items():
        buckets = series.get("buckets", [])
        bounds = [bound for bound, _ in buckets]
        counts = [count for _, count in buckets]
        if bounds != sorted(bounds) or not bounds or not math.isinf(bounds[-1]):
            problems.append(f"{family} {labels}: le not ascending up to +Inf")
        if counts != sorted(counts):
            problems.append(f"{family} {labels}: buckets not cumulative")
        if "_sum" not in series or series.get("_count") != (counts[-1] if counts else None):
            problems.append(f"{family} {labels}: no _sum, or _count differs from the +Inf bucket")
    try:
        list(text_string_to_metric_families(text))
    except Exception as error:  # the client library's own verdict
        problems.append(f"prometheus_client cannot parse it: {error}")
    return problems, samples


def main():
    problems, samples = check(sys.stdin.read())
    if problems:
        print("\n".join(problems))
        return 1
    print(json.dumps(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
