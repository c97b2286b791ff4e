#!/usr/bin/env python3
# Probe (session 30, docs/PERF.md "Session 30"): text edits of the library's held-slab source (softmax 13, `cudal1
# source ... --variant tile3...`), each a change tried against the column log_softmax's last ~1 us, timed by
# held_cubin_probe.cu in the same run as the unedited source. Not part of the library; none of them was kept.
# Session 31: --regs K (the output warps holding K items in registers, a slot freed once read) ran 74.7-76.3 us
# against 78.1-79.4 and became the library's `hold` knob (softmax 14; removed here); --warps stayed.
# Usage: held_edits.py in.cu out.cu [--ffma] [--sum-epilogue] [--lead L] [--grid R P NB] [--fetcher FB [--poll-ns N] [--out-barrier]]
#        [--warps S O]
#   --ffma          the statistics' sums as ex2(fma(x, log2 e, -mL)), mL = fl(m log2 e), each warp's sum multiplied
#                   once a column by 2^-d, d = fma(m, log2 e, -mL) (exact); warps with a |max| > 2^22 keep the
#                   exact form (tests/gpu/softmax_held_test.cpp's LargeColumnMaximaMatchAten is the check)
#   --sum-epilogue  log_softmax's epilogue as v - (m + log sum) (one FADD; inexact near 0 for large m)
#   --lead L        the producer waits for item 0 to land after issuing L items (the start's bubble)
#   --grid R P NB   rows a part, parts a slab and slots (held_grid's are 250, 128, 7 for 132 SMs, merge 4)
#   --fetcher FB    one more warp polls each item's flag and copies its finals into shared memory FB items ahead of
#                   the output warps, which wait on an mbarrier instead of polling (threads + 32); --poll-ns its
#                   sleep between polls (32); --out-barrier keeps the output warps' barrier after that wait
#   --warps S O     statistics and output warps (threads (S + O + 3) x 32, shared memory 224000 + 2 x S x 512)
import argparse

FFMA_OLD = """#pragma unroll
      for (int e = 0; e < 8; ++e) {
        mr[e] = m[e] == NEG_INF ? 0.f : m[e];  // -Inf adds 0, NaN poisons, as the two-pass tiles
        sm[e] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < NV; ++i) {  // rows past the item hold -Inf: they add 0
        const unsigned q4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          sm[2 * q] += EXP_SUB(lo_f(q4[q]), mr[2 * q]);
          sm[2 * q + 1] += EXP_SUB(hi_f(q4[q]), mr[2 * q + 1]);
        }
      }
"""
FFMA_NEW = """      bool wide = false;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        mr[e] = m[e] == NEG_INF ? 0.f : m[e];
        sm[e] = 0.f;
        wide |= !(fabsf(mr[e]) <= 4194304.f);
      }
      if (__any_sync(0xffffffffu, wide)) {
#pragma unroll
        for (int i = 0; i < NV; ++i) {
          const unsigned q4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            sm[2 * q] += EXP_SUB(lo_f(q4[q]), mr[2 * q]);
            sm[2 * q + 1] += EXP_SUB(hi_f(q4[q]), mr[2 * q + 1]);
          }
        }
      } else {
        float ml[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) ml[e] = mr[e] * L2E;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
          const unsigned q4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            sm[2 * q] += ex2(fmaf(lo_f(q4[q]), L2E, -ml[2 * q]));
            sm[2 * q + 1] += ex2(fmaf(hi_f(q4[q]), L2E, -ml[2 * q + 1]));
          }
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) sm[e] *= ex2(-fmaf(mr[e], L2E, -ml[e]));
      }
"""
FETCH = """  if (w == S + O + 3) {  // the finals fetcher: item u's slab flag, then its finals into fin[u % FB]
    for (int u = 0; u < my; ++u) {
      int slab, r0, rows;
      rows_of(u, slab, r0, rows);
      if (u >= FB) mbar_wait(&ffree[u % FB], (unsigned)((u / FB - 1) & 1));
      if (lane == 0)
        while (ld_acquire(flags + slab) == 0u) __nanosleep(POLL_NS);
      __syncwarp();
      const float4* fs = reinterpret_cast<const float4*>(finals + slab * INNER);
      for (int i = lane; i < INNER / 2; i += 32) fin[u % FB][i] = __ldcg(fs + i);
      __syncwarp();
      if (lane == 0) mbar_arrive(&ffull[u % FB]);
    }
    return;
  }
"""
FETCH_OUT = """    mbar_wait(&ffull[u % FB], (unsigned)((u / FB) & 1));
    float m[8], c[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 f = fin[u % FB][g * 4 + k];
      m[2 * k] = f.x;
      c[2 * k] = f.y;
      m[2 * k + 1] = f.z;
      c[2 * k + 1] = f.w;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&ffree[u % FB]);
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ffma", action="store_true")
    ap.add_argument("--sum-epilogue", action="store_true")
    ap.add_argument("--lead", type=int, default=0)
    ap.add_argument("--grid", type=int, nargs=3, metavar=("R", "P", "NB"))
    ap.add_argument("--fetcher", type=int, default=0)
    ap.add_argument("--poll-ns", type=int, default=32)
    ap.add_argument("--out-barrier", action="store_true")
    ap.add_argument("--warps", type=int, nargs=2, metavar=("S", "O"))
    a = ap.parse_args()
    s = open(a.src).read()

    def rep(old, new):
        nonlocal s
        assert s.count(old) == 1, (old, s.count(old))
        s = s.replace(old, new)

    if a.ffma:
        rep(FFMA_OLD, FFMA_NEW)
    if a.sum_epilogue:
        rep("#define EPILOGUE(v, e) (((v) - m[e]) - c[e])", "#define EPILOGUE(v, e) ((v) - (m[e] + c[e]))")
    if a.lead:
        rep("      for (int t = 0; t < min(NB, my); ++t) issue(t);\n",
            "      for (int t = 0; t < min(NB, my); ++t) {\n        issue(t);\n"
            "        if (t + 1 == %d) mbar_wait(&full[0], 0u);\n      }\n" % a.lead)
    if a.grid:
        r, p, nb = a.grid
        head = s.index("static constexpr int OUTER = ")
        end = s.index(";", head)
        outer = s[head:end].split("OUTER = ")[1].split(",")[0]
        s = s[:head] + "static constexpr int OUTER = %s, P = %d, R = %d, NB = %d" % (outer, p, r, nb) + s[end:]
        rep("#define MAX_SLOTS 8\n", "#define MAX_SLOTS %d\n" % max(8, nb))
    if a.fetcher:
        th = int(s.split("#define THREADS ")[1].split("\n")[0])
        rep("#define THREADS %d\n" % th,
            "#define THREADS %d\n#define FB %d\n#define POLL_NS %d\n" % (th + 32, a.fetcher, a.poll_ns))
        rep("statted[2], taken[2];",
            "statted[2], taken[2], ffull[FB], ffree[FB];\n  __shared__ __align__(16) float4 fin[FB][INNER / 2];")
        rep("    for (int i = 0; i < 2; ++i) mbar_init(&statted[i], S), mbar_init(&taken[i], 1);\n",
            "    for (int i = 0; i < 2; ++i) mbar_init(&statted[i], S), mbar_init(&taken[i], 1);\n"
            "    for (int i = 0; i < FB; ++i) mbar_init(&ffull[i], 1), mbar_init(&ffree[i], O);\n")
        rep("  if (w >= S + O) {  // two publisher warps", FETCH + "  if (w >= S + O) {  // two publisher warps")
        i = s.index("    if (ot == 0)  // one poller a block")
        j = s.index("#if LOG\n#define EPILOGUE")
        bar = '    asm volatile("bar.sync 1, %0;" ::"r"(O * 32) : "memory");\n' if a.out_barrier else ""
        s = s[:i] + FETCH_OUT.replace("\n", "\n" + bar, 1) + s[j:]
    if a.warps:
        ws, wo = a.warps
        s0 = int(s.split("#define S ")[1].split(" ")[0])
        o0 = int(s.split("#define O ")[1].split(" ")[0])
        th = int(s.split("#define THREADS ")[1].split("\n")[0])
        rep("#define S %d " % s0, "#define S %d " % ws)
        rep("#define O %d " % o0, "#define O %d " % wo)
        rep("#define THREADS %d\n" % th, "#define THREADS %d\n" % ((ws + wo + 3) * 32))
    open(a.out, "w").write(s)


if __name__ == "__main__":
    main()
