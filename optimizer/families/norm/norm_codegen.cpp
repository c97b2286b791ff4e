/// @brief Source generation for the normalisation family. Statistics are fp32: a row kept in registers gets the
/// exact two-pass mean and variance (sum, then sum of squared deviations); a row streamed through gets per-thread
/// Welford over vectors, merged with Chan's formula, so it is read once for its statistics. The output is
/// (x - mean) * rstd * weight + bias with rstd = rsqrtf(var + eps), var biased, as ATen. Reductions end in lane 0
/// and are broadcast, so every thread of a row normalises with the same mean and rstd.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "codegen_common.h"
#include "norm_family.h"
#include "norm_held.h"

namespace cudal1::optimizer::norm {

int64_t chunk_vectors(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec;
  return (nv + k.splits - 1) / k.splits;
}

int64_t rows_per_group(const NormShape& s, const NormKnobs& k) {
  const int64_t row_bytes = s.cols * (s.dtype == c10::ScalarType::Float ? 4 : 2);
  const int64_t fit = (int64_t{k.chunk_mb} << 20) / row_bytes;
  return std::max<int64_t>(1, std::min(fit, s.rows));
}

int64_t row_groups(const NormShape& s, const NormKnobs& k) {
  const int64_t rpg = rows_per_group(s, k);
  return (s.rows + rpg - 1) / rpg;
}

namespace {

const char* kBody = R"(struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
__device__ __forceinline__ Welford wf_vector(const vec_t& t) {
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) s += to_float(t.v[e]);
  const float m = s * (1.f / VEC);
  float q = 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float d = to_float(t.v[e]) - m;
    q += d * d;
  }
  return Welford{(float)VEC, m, q};
}
__device__ __forceinline__ Welford warp_welford(Welford w) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Welford b{__shfl_down_sync(0xffffffffu, w.n, o), __shfl_down_sync(0xffffffffu, w.mean, o),
                    __shfl_down_sync(0xffffffffu, w.m2, o)};
    w = wf_combine(w, b);
  }
  return Welford{__shfl_sync(0xffffffffu, w.n, 0), __shfl_sync(0xffffffffu, w.mean, 0),
                 __shfl_sync(0xffffffffu, w.m2, 0)};
}
#if TPR == 32
__device__ __forceinline__ Welford row_welford(Welford w, float*) { return warp_welford(w); }
#else
__device__ __forceinline__ Welford row_welford(Welford w, float* red) {
  w = warp_welford(w);
  const int wid = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0) {
    red[wid] = w.n;
    red[32 + wid] = w.mean;
    red[64 + wid] = w.m2;
  }
  ROW_BARRIER();
  Welford t{0.f, 0.f, 0.f};
  if (l < BLOCK / 32) t = Welford{red[l], red[32 + l], red[64 + l]};
  t = warp_welford(t);
  ROW_BARRIER();
  return t;
}
#endif
/// Affine parameters of vector `j` of row `row` (Note [Norm rows]).
__device__ __forceinline__ void affine(const storage_t* __restrict__ w, const storage_t* __restrict__ b, index_t row,
                                       index_t j, float* wv, float* bv) {
#if GROUP
  const index_t c = (row % G) * CPG + (j * VEC) / HW;
  const float ww = HAS_W ? to_float(w[HAS_W ? c : 0]) : 1.f;
  const float bb = HAS_B ? to_float(b[HAS_B ? c : 0]) : 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    wv[e] = ww;
    bv[e] = bb;
  }
#else
#if HAS_W
  const vec_t tw = reinterpret_cast<const vec_t*>(w)[j];
#endif
#if HAS_B
  const vec_t tb = reinterpret_cast<const vec_t*>(b)[j];
#endif
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
#if HAS_W
    wv[e] = to_float(tw.v[e]);
#else
    wv[e] = 1.f;
#endif
#if HAS_B
    bv[e] = to_float(tb.v[e]);
#else
    bv[e] = 0.f;
#endif
  }
#endif
}
/// The statistics the output is computed from (Note [Norm rows]: group norm in fp16/bf16 uses rounded ones).
__device__ __forceinline__ float used_stat(float v) {
#if ROUND_STATS
  return to_float(to_storage(v));
#else
  return v;
#endif
}
__device__ __forceinline__ vec_t normalise(const vec_t& t, float mean, float rstd, const float* wv, const float* bv) {
  vec_t o;
#if FUSED_AFFINE
  // ATen's group norm: y = a * x + b with a = rstd * w, b = bias - a * mean (with HxW = 1 it uses the
  // layer-norm form below).
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float a = HAS_W ? rstd * wv[e] : rstd;
    const float c = fmaf(-a, mean, HAS_B ? bv[e] : 0.f);
    o.v[e] = to_storage(fmaf(a, to_float(t.v[e]), c));
  }
#else
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    float v = (to_float(t.v[e]) - mean) * rstd;
#if HAS_W
    v = v * wv[e];
#endif
#if HAS_B
    v = v + bv[e];
#endif
    o.v[e] = to_storage(v);
  }
#endif
  return o;
}
#if MODE == 3 || MODE == 5 || MODE == 6 || MODE == 8
/// Thread 0 writes the block's triple (row_welford gave every thread the same) to the workspace at i x 3.
__device__ __forceinline__ void publish(float* ws, index_t i, const Welford& acc) {
  if (threadIdx.x == 0) {
    float* p = ws + i * 3;
    p[0] = acc.n;
    p[1] = acc.mean;
    p[2] = acc.m2;
  }
}
/// Thread 0 (which wrote this block's triples) publishes them and arrives on counter g.
__device__ __forceinline__ void group_arrive(unsigned* arrived, index_t g) {
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrived + g, 1u);
  }
}
/// Returns when every block of the grid has arrived on counter g (all blocks are resident: the launch is
/// cooperative).
__device__ __forceinline__ void group_wait(const unsigned* arrived, index_t g) {
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(arrived + g) < gridDim.x) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();
}
/// The statistics of row `row` from its `parts` triples in the workspace (written by other blocks:
/// ld.global.cg, not L1), merged in the same order and tree in every block: bit-identical everywhere.
__device__ __forceinline__ Welford merge_row(const float* ws, index_t row, index_t parts, float* red) {
  Welford acc{0.f, 0.f, 0.f};
  for (index_t t = threadIdx.x; t < parts; t += BLOCK) {
    const float* p = ws + (row * parts + t) * 3;
    acc = wf_combine(acc, Welford{__ldcg(p), __ldcg(p + 1), __ldcg(p + 2)});
  }
  return row_welford(acc, red);
}
/// Merges row `row`'s `parts` triples (merge_row), stores mean and rstd where `writer` (one block a row), and
/// returns the values the output is computed from in *mean_u and *rstd_u.
__device__ __forceinline__ void merged_stats(const float* ws, index_t row, index_t parts, bool writer,
                                             stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                             float* red, float* mean_u, float* rstd_u) {
  const Welford acc = merge_row(ws, row, parts, red);
  const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)COLS + EPS);
  if (writer && threadIdx.x == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  *mean_u = used_stat(mean);
  *rstd_u = used_stat(rstd);
}
#endif
#if MODE == 3
/// Calls f(j, xr[j]) for this thread's vectors j of [j0, j1), in order, four loads in flight (Note [Norm groups]).
template <typename F>
__device__ __forceinline__ void for_vectors(const vec_t* __restrict__ xr, index_t j0, index_t j1, F&& f) {
  index_t j = j0 + threadIdx.x;
  for (; j + 3 * BLOCK < j1; j += 4 * BLOCK) {
    vec_t t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) t[u] = xr[j + u * BLOCK];
#pragma unroll
    for (int u = 0; u < 4; ++u) f(j + u * BLOCK, t[u]);
  }
  for (; j < j1; j += BLOCK) f(j, xr[j]);
}
/// Row group g, first read: this block's parts' triples to the workspace, then its arrival on g's counter.
__device__ __forceinline__ void group_stats(const storage_t* __restrict__ x, float* __restrict__ ws,
                                            unsigned* __restrict__ arrived, index_t g, float* red) {
  for (index_t i = blockIdx.x; i < RPG * S; i += gridDim.x) {
    const index_t row = g * RPG + i / S, part = i % S;
    if (row >= ROWS) break;  // the last group may be short; uniform over the block
    const index_t j0 = part * CHV, j1 = j0 + CHV < NV ? j0 + CHV : NV;
    Welford acc{0.f, 0.f, 0.f};
    for_vectors(reinterpret_cast<const vec_t*>(x + row * COLS), j0, j1,
                [&](index_t, const vec_t& t) { acc = wf_combine(acc, wf_vector(t)); });
    acc = row_welford(acc, red);
    publish(ws, row * S + part, acc);
  }
  group_arrive(arrived, g);
}
/// Row group g, second read (from L2): merge each part's row triples (same order in every block), normalise.
__device__ __forceinline__ void group_normalise(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                                const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                                stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                                const float* ws, index_t g, float* red) {
  float wv[VEC], bv[VEC];
  for (index_t i = blockIdx.x; i < RPG * S; i += gridDim.x) {
    const index_t row = g * RPG + i / S, part = i % S;
    if (row >= ROWS) break;
    float mean_u, rstd_u;
    merged_stats(ws, row, S, part == 0, mean_out, rstd_out, red, &mean_u, &rstd_u);
    const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + row * COLS);
    vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
    const index_t j0 = part * CHV, j1 = j0 + CHV < NV ? j0 + CHV : NV;
    for_vectors(xr, j0, j1, [&](index_t j, const vec_t& t) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(t, mean_u, rstd_u, wv, bv);
    });
  }
}
#endif
)";

const char* kKernel = R"(extern "C" __global__ void LAUNCH_BOUNDS
cudal1_norm(const storage_t* __restrict__ x, const storage_t* __restrict__ w, const storage_t* __restrict__ b,
            storage_t* __restrict__ y, stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
            float* __restrict__ ws, int phase) {
  __shared__ float red[96];
#if MODE < 3
  float wv[VEC], bv[VEC];
#endif
#if MODE < 2
  const int lane = threadIdx.x % TPR;
  const index_t row = (index_t)blockIdx.x * RPB + threadIdx.x / TPR;
  const bool live = row < ROWS;  // dead rows still take part in the reductions
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (live ? row : 0) * COLS);
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + (live ? row : 0) * COLS);
#if CACHE
  vec_t c[PER];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const index_t j = lane + (index_t)i * TPR;
    if (live && j < NV) {
      c[i] = xr[j];
#pragma unroll
      for (int e = 0; e < VEC; ++e) s += to_float(c[i].v[e]);
    }
  }
  const float mean = row_sum(s, red) / (float)COLS;
  float q = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const index_t j = lane + (index_t)i * TPR;
    if (live && j < NV) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = to_float(c[i].v[e]) - mean;
        q += d * d;
      }
    }
  }
  const float var = row_sum(q, red) / (float)COLS;
#else
  Welford acc{0.f, 0.f, 0.f};
  for (index_t j = lane; live && j < NV; j += TPR) acc = wf_combine(acc, wf_vector(xr[j]));
  acc = row_welford(acc, red);
  const float mean = acc.mean, var = acc.m2 / (float)COLS;
#endif
  const float rstd = rsqrtf(var + EPS);
  if (live && lane == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
#if CACHE
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const index_t j = lane + (index_t)i * TPR;
    if (live && j < NV) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(c[i], mean_u, rstd_u, wv, bv);
    }
  }
#else
  for (index_t j = lane; live && j < NV; j += TPR) {
    affine(w, b, row, j, wv, bv);
    yr[j] = normalise(xr[j], mean_u, rstd_u, wv, bv);
  }
#endif
#elif MODE == 2  // phase 0 writes each chunk's Welford triple, phase 1 merges a row's triples and normalises
  const index_t blk = (REV && phase == 1) ? (index_t)gridDim.x - 1 - blockIdx.x : (index_t)blockIdx.x;
  const index_t row = blk / S, part = blk % S;
  const index_t j0 = part * CHV, j1 = j0 + CHV < NV ? j0 + CHV : NV;
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + row * COLS);
  if (phase == 0) {
    Welford acc{0.f, 0.f, 0.f};
    for (index_t j = j0 + threadIdx.x; j < j1; j += BLOCK) acc = wf_combine(acc, wf_vector(xr[j]));
    acc = row_welford(acc, red);
    if (threadIdx.x == 0) {
      ws[blk * 3] = acc.n;
      ws[blk * 3 + 1] = acc.mean;
      ws[blk * 3 + 2] = acc.m2;
    }
    return;
  }
  Welford acc{0.f, 0.f, 0.f};
  for (index_t t = threadIdx.x; t < S; t += BLOCK) {
    const float* p = ws + (row * S + t) * 3;
    acc = wf_combine(acc, Welford{p[0], p[1], p[2]});
  }
  acc = row_welford(acc, red);
  const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)COLS + EPS);
  if (part == 0 && threadIdx.x == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
  const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
  for (index_t j = j0 + threadIdx.x; j < j1; j += BLOCK) {
    affine(w, b, row, j, wv, bv);
    yr[j] = normalise(xr[j], mean_u, rstd_u, wv, bv);
  }
#elif MODE == 3  // row groups in one cooperative launch (Note [Norm groups]); the counters follow the triples
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + ROWS * S * 3);
  for (index_t g = 0; g < NG + AHEAD; ++g) {
    if (g < NG) group_stats(x, ws, arrived, g, red);
    if (g >= AHEAD) {
      group_wait(arrived, g - AHEAD);
      group_normalise(x, w, b, y, mean_out, rstd_out, ws, g - AHEAD, red);
    }
  }
#elif MODE == 4  // a row per thread-block cluster, kept on chip (Note [Norm clusters])
  cluster_rows(x, w, b, y, mean_out, rstd_out, red);
#elif MODE == 5  // steps of rows over the whole grid, kept on chip in a load-ahead ring (Note [Norm ring])
  ring_rows(x, w, b, y, mean_out, rstd_out, ws, red);
#elif MODE == 6  // parts of rows dealt by ticket, kept in registers (Note [Norm parts])
  parts_rows(x, w, b, y, mean_out, rstd_out, ws, red);
#else  // MODE 7, 8: a row per cluster or per GP blocks of the grid, held in registers, fed by bulk copies
       // (Note [Norm held])
  held_rows(x, w, b, y, mean_out, rstd_out, ws, red);
#endif
}
)";

}  // namespace

KernelSource generate_norm(const NormShape& s, const NormKnobs& k) {
  const int tpr = k.mode == 0 ? 32 : k.block;
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &s.eps, sizeof eps_bits);
  std::ostringstream o;
  o << "// cudal1 norm: " << (s.group ? "group" : "layer") << " " << c10::toString(s.dtype) << " rows=" << s.rows
    << " cols=" << s.cols << " mode=" << k.mode << " vec=" << k.vec << " block=" << k.block << " cache=" << k.cache
    << " splits=" << k.splits << " reverse=" << k.reverse << " chunk_mb=" << k.chunk_mb << " ahead=" << k.ahead
    << " cluster=" << k.cluster << " occ=" << k.occ << " step_mb=" << k.step_mb << " ring=" << k.ring
    << " per=" << k.per << " chunk_kb=" << k.chunk_kb << " deep=" << k.deep << "\n";
  o << "typedef long long index_t;\n" << dtype_prelude(s.dtype);
  if (s.stat_dtype == c10::ScalarType::Float)
    o << "typedef float stat_t;\n__device__ __forceinline__ stat_t to_stat(float f) { return f; }\n";
  else
    o << "typedef storage_t stat_t;\n__device__ __forceinline__ stat_t to_stat(float f) { return to_storage(f); }\n";
  o << "#define VEC " << k.vec << "\n#define BLOCK " << k.block << "\n#define TPR " << tpr
    << "\n#define RPB (BLOCK / TPR)\n#define MODE " << k.mode << "\n#define CACHE " << (k.cache ? 1 : 0)
    << "\n#define HAS_W " << (s.has_weight ? 1 : 0) << "\n#define HAS_B " << (s.has_bias ? 1 : 0)
    << "\n#define GROUP " << (s.group ? 1 : 0) << "\n#define FUSED_AFFINE " << (s.group && s.hw > 1 ? 1 : 0)
    << "\n#define ROUND_STATS " << (s.round_stats ? 1 : 0)
    << "\n#define REV " << (k.reverse ? 1 : 0) << "\n";
  if (k.mode == 4 && k.occ > 1)
    o << "#define LAUNCH_BOUNDS __launch_bounds__(BLOCK, " << k.occ << ")\n";
  else if (k.mode == 6)
    o << "#define LAUNCH_BOUNDS __launch_bounds__(BLOCK, " << parts_min_blocks(k.block, k.ahead) << ")\n";
  else if (k.mode >= 7)  // the consumers and the producer warps, one block an SM
    o << "#define LAUNCH_BOUNDS __launch_bounds__(" << held_threads(s, k) << ", 1)\n";
  else
    o << "#define LAUNCH_BOUNDS __launch_bounds__(BLOCK)\n";
  o << "#define EPS __int_as_float(0x" << std::hex << eps_bits << std::dec << "u)\n";
  // Macros rather than constants: each variant uses a different subset of them.
  o << "#define ROWS ((index_t)" << s.rows << "LL)\n"
    << "#define COLS ((index_t)" << s.cols << "LL)\n"
    << "#define NV (COLS / VEC)\n"
    << "#define G ((index_t)" << s.groups << "LL)\n#define CPG ((index_t)" << s.channels_per_group
    << "LL)\n#define HW ((index_t)" << s.hw << "LL)\n"
    << "#define S ((index_t)" << k.splits << "LL)\n#define CHV ((index_t)"
    << (k.mode == 4   ? cluster_slice_vectors(s, k)
        : k.mode >= 7 ? int64_t{k.block} * held_vectors_per_chunk_thread(k)
        : k.mode >= 2 ? chunk_vectors(s, k)
                      : 1)
    << "LL)\n";
  if (k.mode == 3)
    o << "#define RPG ((index_t)" << rows_per_group(s, k) << "LL)\n#define NG ((index_t)" << row_groups(s, k)
      << "LL)\n#define AHEAD " << (k.ahead ? 1 : 0) << "\n";
  if (k.cache) o << "static constexpr int PER = (int)((NV + TPR - 1) / TPR);  // vectors each thread keeps\n";
  if (k.mode == 5)
    o << "#define RPS ((index_t)" << ring_rows_per_step(s, k) << "LL)\n#define NS ((index_t)" << ring_steps(s, k)
      << "LL)\n#define RING " << k.ring << "\n#define VEC_BYTES " << k.vec * elem_size(s.dtype) << "\n";
  if (k.mode == 6)
    o << "#define NPARTS ((index_t)" << parts_per_row(s, k) << "LL)\n#define PER " << k.per << "\n#define AHEAD "
      << (k.ahead ? 1 : 0) << "\n";
  if (k.mode == 4) {
    const int64_t spt = cluster_vectors_per_thread(s, k);
    const int regs = cluster_registers(s, k);
    o << "#define CL " << k.cluster << "\n#define VEC_BYTES " << k.vec * elem_size(s.dtype) << "\n#define SPT "
      << spt << "\n#define REGS " << regs << "\n#define HALF " << regs + (spt - regs) / 2 << "\n";
  }
  if (k.mode >= 7) {  // mode 8: k.cluster is the row's blocks of the grid, GP, and CL is 1
    const int cpt = held_vectors_per_chunk_thread(k);
    if (k.mode == 8) o << "#define GP " << k.cluster << "\n";
    o << "#define CL " << (k.mode == 8 ? 1 : k.cluster) << "\n#define SV ((index_t)" << held_slice_vectors(s, k)
      << "LL)\n#define CPT " << cpt << "\n#define CH " << held_chunks(s, k) << "\n#define KEEP "
      << held_kept_chunks(s, k) << "\n#define DROP (CH - KEEP)\n#define HELD (KEEP * CPT)"
                                   "\n#define NSLOT " << held_slots(s, k)
      << "\n#define NSLOTB " << held_reread_slots(s, k) << "\n";
  }
  if (k.mode >= 7)  // named barrier 1 over the consumers: the producer warps take no part in the reductions
    o << "#define ROW_BARRIER() asm volatile(\"bar.sync 1, %0;\" ::\"n\"(BLOCK) : \"memory\")\n";
  o << row_reduce_source() << welford_source() << kBody;
  if (k.mode == 4) o << async_copy_source() << cluster_primitives_source() << cluster_source();
  if (k.mode == 5) o << async_copy_source() << ring_source();
  if (k.mode == 6) o << ticket_source() << parts_source();
  if (k.mode == 7) o << cluster_primitives_source() << held_source();
  if (k.mode == 8) o << held_source();
  o << kKernel;
  return KernelSource{o.str(), "cudal1_norm"};
}

}  // namespace cudal1::optimizer::norm
