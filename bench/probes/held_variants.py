#!/usr/bin/env python3
# Probe (session 29, docs/PERF.md): macro switches over the library's held-slab source of commit 96d3b9c (softmax 12,
# v5: P, R and NB as kernel arguments), to tell which difference from the split probe (column_split_probe.cu) costs
# what. Not part of the library; the library's source since softmax 13 has P, R and NB compiled in (CT below).
# Usage (from a checkout of 96d3b9c's build):
#   cudal1 source 'aten::_log_softmax(bf16[32,32000,64]{2048000,64,1}, 1, False)' \
#     --variant tile3.stats6.out8.merge4.pf0 --sm 90 > base_s6.cu
#   python3 held_variants.py base_s6.cu exp_s6.cu
#   nvcc -arch=sm_90 -cubin -DCT=1 -o s6_ct.cubin exp_s6.cu   (any of the switches below)
#   ./held_cubin_probe s6_ct.cubin 544 ...
# Switches (0 by default): PW a poller a warp instead of one a block; FS 32: counters and flags a line apart;
# MIF 16: merge loads in flight (8); FFMA: the sums' exp as ex2(fma(x, log2 e, -m log2 e)); CT: P 128, R 250, NB 7
# as constants (a 132-SM part, merge 4); CTP: P and R only; CTNB: NB only; RM: rows bound 250 instead of 291; FD:
# P and NB divisions by multiply-shift; F1: finals as one float (max + log sum) a column, the probe's epilogue;
# FTZ: ex2.approx.ftz in the sums; GUARD: the statistics' passes stop at the item's rows (a warp-uniform break).
import re
import sys

SWITCHES = ["PW", "FS", "MIF", "FFMA", "CT", "F1", "FTZ", "GUARD", "RM", "FD", "CTP", "CTNB"]
DEFAULTS = {"FS": 1, "MIF": 8}


def main(src_path, out_path):
    s = open(src_path).read()

    def rep(old, new, count=1):
        nonlocal s
        assert s.count(old) == count, (old, s.count(old))
        s = s.replace(old, new)

    hdr = "".join(f"#ifndef {k}\n#define {k} {DEFAULTS.get(k, 0)}\n#endif\n" for k in SWITCHES)
    rep("typedef long long index_t;\n", hdr + "typedef long long index_t;\n")
    ex2 = 'asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t));'
    rep("#define EXP_SUB(v, mx) fast_exp_sub(v, mx)\n",
        "#if FFMA\n#define EXP_SUB(v, mx) ex2_(fmaf(v, 1.4426950408889634f, -(mx) * 1.4426950408889634f))\n"
        "__device__ __forceinline__ float ex2_(float t) { float r; " + ex2 + " return r; }\n"
        "#else\n#define EXP_SUB(v, mx) fast_exp_sub(v, mx)\n#endif\n")
    rep("int P, int R, int NB) {\n", """int P_, int R_, int NB_) {
#if CT
  constexpr int P = 128, R = 250, NB = 7;
#elif CTP
  constexpr int P = 128, R = 250; const int NB = NB_;
#elif CTNB
  constexpr int NB = 7; const int P = P_, R = R_;
#else
  const int P = P_, R = R_, NB = NB_;
#endif
#if FD
  auto magic = [](unsigned d, unsigned& m, unsigned& s) {
    s = 0; while ((1u << s) < d) ++s;
    m = (unsigned)(((1ull << 32) * ((1ull << s) - d)) / d + 1); };
  unsigned pm, ps, nm, ns; magic(P, pm, ps); magic(NB, nm, ns);
#define QP(n) ((int)((__umulhi((unsigned)(n), pm) + (unsigned)(n)) >> ps))
#define QNB(n) ((int)((__umulhi((unsigned)(n), nm) + (unsigned)(n)) >> ns))
#else
#define QP(n) ((n) / P)
#define QNB(n) ((n) / NB)
#endif
""")
    rep("RMAX = 291;", "RMAX = (CT || RM) ? 250 : 291;")
    rep("unsigned* const flags = counters + OUTER;", "unsigned* const flags = counters + OUTER * FS;")
    rep("counters + slab", "counters + slab * FS", 2)
    rep("flags + slab", "flags + slab * FS", 2)
    rep("i0 += 8) {", "i0 += MIF) {")
    rep("float2 b[8];", "float2 b[MIF];")
    rep("for (int i = 0; i < 8; ++i)\n            b[i]", "for (int i = 0; i < MIF; ++i)\n            b[i]")
    rep("fold_pairs<8>(acc", "fold_pairs<MIF>(acc")
    rep("        finals[slab * INNER + tid] = f;\n",
        "#if F1\n        reinterpret_cast<float*>(finals)[slab * INNER + tid] = f.x + f.y;\n#else\n"
        "        finals[slab * INNER + tid] = f;\n#endif\n")
    old_poll = """    if (ot == 0)  // one poller a block: every poll of every block loads the flags' one L2 line
      while (ld_acquire(flags + slab * FS) == 0u) __nanosleep(32);
    asm volatile("bar.sync 1, %0;" ::"r"(O * 32) : "memory");"""
    rep(old_poll, "#if PW\n    if (lane == 0) while (ld_acquire(flags + slab * FS) == 0u) __nanosleep(32);\n"
        "    __syncwarp();\n#else\n" + old_poll + "\n#endif")
    i = s.index("    constexpr int LG = 32 / LPR")
    j = s.index("#if LOG\n#define EPILOGUE")
    k = s.index("#endif\n", j) + len("#endif\n")
    f1 = """#if F1
    const float* ff = reinterpret_cast<const float*>(finals) + slab * INNER + g * 8;
    const float4 c0 = __ldcg(reinterpret_cast<const float4*>(ff)), c1 = __ldcg(reinterpret_cast<const float4*>(ff + 4));
    const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#define EPILOGUE(v, e) ((v) - c[e])
#else
"""
    s = s[:i] + f1 + s[i:k] + "#endif\n" + s[k:]
    rep("""        const int r = tid / LPR + i * RPS;
        v[i] = r < rows""", """        if (GUARD && i * RPS >= rows) break;
        const int r = tid / LPR + i * RPS;
        v[i] = r < rows""")
    rep("""      for (int i = 0; i < NV; ++i) {  // rows past the item hold -Inf: they add 0
""", """      for (int i = 0; i < NV; ++i) {  // rows past the item hold -Inf: they add 0
        if (GUARD && i * RPS >= rows) break;
""")
    for h, e in (("lo_f", "2 * q"), ("hi_f", "2 * q + 1")):
        rep(f"EXP_SUB({h}(q4[q]), mr[{e}])", f"EXP_SUM({h}(q4[q]), mr[{e}])")
    rep("#define NEG_INF", """#if FTZ
__device__ __forceinline__ float exp_sum_ftz(float x, float mx) {
  const float t = (x - mx) * 1.4426950408889634f;
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}
#define EXP_SUM(v, mx) exp_sum_ftz(v, mx)
#else
#define EXP_SUM(v, mx) EXP_SUB(v, mx)
#endif
#define NEG_INF""")
    rep("slab = k / P;", "slab = QP(k);")
    rep("r0 = (k % P) * R;", "r0 = (k - QP(k) * P) * R;")
    rep("(bd + t * GD) % P)", "(bd + t * GD) - QP(bd + t * GD) * P)")
    s = re.sub(r"\((\w) / NB\)", r"(QNB(\1))", s)
    s = re.sub(r"\[(\w) % NB\]", r"[\1 - QNB(\1) * NB]", s)
    s = re.sub(r"\(size_t\)\((\w) % NB\)", r"(size_t)(\1 - QNB(\1) * NB)", s)
    open(out_path, "w").write(s)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
