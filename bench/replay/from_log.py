"""Turns the tuner's debug log lines of one signature into a landscape CSV (bench/replay/README.md).
Usage: python3 from_log.py LOG MATCH > NAME.csv   (MATCH: a substring of that signature's log lines)."""
import re
import sys

LINE = re.compile(r": (\S+) speedup \S+ \(p25 \S+, ATen \S+ us, kernel ([0-9.]+) us\)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    times = {}
    with open(sys.argv[1]) as log:
        for line in log:
            m = LINE.search(line) if sys.argv[2] in line else None
            if m:
                times[m.group(1)] = m.group(2)  # a variant timed twice: the later time, as the tuner kept it
    print("variant,kernel_us")
    for variant in sorted(times):
        print(f"{variant},{times[variant]}")


if __name__ == "__main__":
    main()
