#!/usr/bin/env python3
"""Fails (exit 1) when a C++ function in the given folders runs over LIMIT lines (the project's
style: functions under about 150 lines). A function is a definition whose header line ends with
'{' at namespace level (column 0) or as a class member (column 2), up to the '}' at that column.
Usage: tools/check_function_length.py LIMIT DIR [DIR ...]"""
import os
import re
import sys

HEADER = re.compile(r"^( {0,2})[A-Za-z_][^;]*\)\s*(const\s*)?(noexcept\s*)?(->[^{]*)?\{\s*(//.*)?$")
SKIP = re.compile(r"^\s*(namespace|struct|class|enum|union|if|for|while|switch|else|do)\b")


def long_functions(path, limit):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        m = HEADER.match(lines[i])
        if not m or SKIP.match(lines[i]):
            i += 1
            continue
        close = m.group(1) + "}"
        j = i + 1
        while j < len(lines) and not (lines[j] == close or lines[j].startswith(close + ";") or lines[j].startswith(close + " ")):
            j += 1
        if j - i + 1 > limit:
            yield i + 1, j - i + 1, lines[i].strip()[:80]
        i = j + 1


def main():
    limit = int(sys.argv[1])
    bad = 0
    for root in sys.argv[2:]:
        for d, _, files in os.walk(root):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".cu", ".cuh")):
                    p = os.path.join(d, f)
                    for line, n, head in long_functions(p, limit):
                        print(f"{p}:{line}: function of {n} lines (limit {limit}): {head}")
                        bad += 1
    print(f"check_function_length: {bad} function(s) over {limit} lines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
