#!/usr/bin/env python3
"""Summarises an Nsight Compute report exported as CSV (tools/device/bench.sh mode `stalls`).

`raw`: the raw page of one kernel (`ncu -i R --page raw --csv --metrics ...`): prints each metric
with its value, the stall reasons (warps stalled per issued instruction, by reason) sorted, largest
first. `source N`: the SASS source page (`ncu -i R --page source --csv --print-source sass`):
prints the N instructions with the most warp stall samples, with their share of all samples.
"""
import csv
import sys


def rows(stream):
    return [r for r in csv.reader(stream) if r]


def raw(table):
    if len(table) < 3:
        print("no raw metrics"); return
    head, values = table[0], table[-1]  # header, units, then one row per kernel (one kernel profiled)
    stalls, other = [], []
    for name, value in zip(head, values):
        try:
            v = float(value.replace(",", ""))
        except ValueError:
            continue
        if name.startswith("smsp__average_warps_issue_stalled_"):
            stalls.append((v, name[len("smsp__average_warps_issue_stalled_"):].replace("_per_issue_active.ratio", "")))
        else:
            other.append((name, v))
    for name, v in other:
        print(f"  {name:60s} {v:14.4g}")
    total = sum(v for v, _ in stalls)
    print(f"  stall reasons (warps stalled per issued instruction; total {total:.2f}):")
    for v, name in sorted(stalls, reverse=True)[:14]:
        print(f"    {name:32s} {v:7.3f}  {100 * v / total if total else 0:5.1f}%")


def source(table, n):
    if not table:
        print("no source page"); return
    head = table[0]
    col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    src = next((i for i, h in enumerate(head) if h == "Source"), 1)
    if col is None:
        print("no stall sampling column among:", ", ".join(head[:12])); return
    body = []
    for r in table[1:]:
        try:
            body.append((float(r[col].replace(",", "")), r[0], r[src]))
        except (ValueError, IndexError):
            pass
    total = sum(b[0] for b in body) or 1
    print(f"  top {n} SASS instructions by warp stall samples ({int(total)} samples):")
    for v, addr, text in sorted(body, reverse=True)[:n]:
        print(f"    {100 * v / total:5.1f}%  {addr:>8s}  {text[:110]}")


if __name__ == "__main__":
    table = rows(sys.stdin)
    if sys.argv[1] == "raw":
        raw(table)
    else:
        source(table, int(sys.argv[2]) if len(sys.argv) > 2 else 30)
