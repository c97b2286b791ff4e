#!/usr/bin/env python3
"""Symbolises hostprof.cpp's samples and prints, per profile, the functions with the largest self and inclusive
shares of the sampled thread's wall time; with two profiles, also the functions whose inclusive share differs most.

Usage: python3 bench/probes/hostprof_report.py A.prof [B.prof] [--top N]
Needs addr2line (binutils) for functions a library does not export; exported ones come from dladdr already.
"""
import collections
import subprocess
import sys


def load(path):
    addrs, samples = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("A "):
                _, i, lib, off, sym = line.rstrip("\n").split(" ", 4)
                addrs[int(i)] = (lib, off, sym)
            elif line.startswith("S"):
                samples.append([int(x) for x in line.split()[1:]])
    return addrs, samples


def symbolise(addrs):
    by_lib = collections.defaultdict(list)
    for i, (lib, off, _) in addrs.items():
        if lib != "?":
            by_lib[lib].append((i, off))
    names = {i: (sym if sym != "?" else f"{lib.rsplit('/', 1)[-1]}+{off}") for i, (lib, off, sym) in addrs.items()}
    for lib, items in by_lib.items():
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", lib] + [o for _, o in items], capture_output=True,
                                 text=True, timeout=600).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            continue
        for k, (i, off) in enumerate(items):
            fn = out[2 * k] if 2 * k < len(out) else "??"
            if fn and fn != "??":
                names[i] = fn
    short = lambda s: s if len(s) < 140 else s[:137] + "..."
    return {i: short(n) for i, n in names.items()}


def shares(path):
    addrs, samples = load(path)
    names = symbolise(addrs)
    self_c, incl = collections.Counter(), collections.Counter()
    for s in samples:
        if not s:
            continue
        self_c[names[s[0]]] += 1
        for n in set(names[i] for i in s):
            incl[n] += 1
    n = max(1, len(samples))
    return n, {k: v / n for k, v in self_c.items()}, {k: v / n for k, v in incl.items()}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = 40
    if "--top" in sys.argv:
        top = int(sys.argv[sys.argv.index("--top") + 1])
        args = [a for a in args if a != str(top)]
    profiles = [(p, *shares(p)) for p in args]
    for p, n, self_s, incl in profiles:
        print(f"== {p}: {n} samples")
        print("  self%  function")
        for k, v in sorted(self_s.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * v:5.1f}  {k}")
        print("  incl%  function")
        for k, v in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * v:5.1f}  {k}")
    if len(profiles) == 2:
        (pa, _, _, ia), (pb, _, _, ib) = profiles
        print(f"== inclusive share, {pb} minus {pa}")
        keys = set(ia) | set(ib)
        for k in sorted(keys, key=lambda k: -abs(ib.get(k, 0) - ia.get(k, 0)))[:top]:
            print(f"  {100 * (ib.get(k, 0) - ia.get(k, 0)):+6.1f}  {100 * ia.get(k, 0):5.1f} -> {100 * ib.get(k, 0):5.1f}  {k}")


if __name__ == "__main__":
    main()
