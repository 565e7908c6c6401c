#!/usr/bin/env python3
"""Prices every kernel of a model ledger (tests/model/ledger-*.tsv: measured on a GPU with the schedule it
ran) with `napkin derive --schedule .. --format json`, prints predicted beside measured with the error
(predicted / measured - 1), and fails (exit 1) where a row no longer prices (a stale row: its diagram or
schedule is refused), or where the median |error| or the worst |error| passes its bound. The bounds guard
the model against regressions; issue 12 asks every kernel within 15% and issue 14 a median within 5% and
a worst within 12%, and the report counts the rows outside those. The bundled hardware descriptions are
used (NAPKIN_HARDWARE_DIR is cleared).
Usage: ledger_check.py NAPKIN LEDGER [--hw h200] [--max-median 0.10] [--max-worst 0.30]"""
import argparse, json, os, statistics, subprocess, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("napkin")
    ap.add_argument("ledger")
    ap.add_argument("--hw", default="h200")
    ap.add_argument("--max-median", type=float, default=0.10)
    ap.add_argument("--max-worst", type=float, default=0.30)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    schedules = os.path.join(os.path.dirname(os.path.abspath(a.ledger)), "schedules")
    env = {k: v for k, v in os.environ.items() if k != "NAPKIN_HARDWARE_DIR"}
    errors, stale = [], []
    print(f"{'kernel':34s} {'measured':>10s} {'predicted':>10s} {'error':>8s}")
    for n, line in enumerate(open(a.ledger), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 6:
            stale.append(f"{a.ledger}:{n}: {len(cols)} columns, 6 expected")
            continue
        tag, measured, path, sizes, schedule, _source = cols
        path, _, diagram = path.partition(":")
        cmd = [a.napkin, "derive", os.path.join(root, path), "--hw", a.hw, "--format", "json", "--schedule", os.path.join(schedules, schedule)]
        if diagram:
            cmd += ["--diagram", diagram]
        for s in sizes.split(",") if sizes != "-" else []:
            cmd += ["--set", s]
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
        if run.returncode != 0:
            stale.append(f"{a.ledger}:{n}: {tag}: napkin derive exit {run.returncode}: {run.stderr.strip()[:300]}")
            continue
        predicted = json.loads(run.stdout)["predicted_seconds"] * 1e6
        err = predicted / float(measured) - 1
        errors.append((tag, err))
        print(f"{tag:34s} {float(measured):10.1f} {predicted:10.1f} {100 * err:+7.1f}%")
    for s in stale:
        print("stale row:", s)
    if not errors:
        print("no row priced")
        return 1
    mags = [abs(e) for _, e in errors]
    med, worst = statistics.median(mags), max(errors, key=lambda t: abs(t[1]))
    over15 = sum(m > 0.15 for m in mags)
    over12 = sum(m > 0.12 for m in mags)
    print(f"{len(errors)} kernels: median |error| {100 * med:.1f}%, worst {worst[0]} {100 * worst[1]:+.1f}%; "
          f"{over15} over 15% (issue 12), {over12} over 12% (issue 14)")
    ok = not stale and med <= a.max_median and abs(worst[1]) <= a.max_worst
    if not ok:
        print(f"FAILED: bounds median {100 * a.max_median:.0f}%, worst {100 * a.max_worst:.0f}%; {len(stale)} stale row(s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
