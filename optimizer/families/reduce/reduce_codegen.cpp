/// @brief Source generation for the reduction family (Note [Reductions]): an accumulator per op (fp32 sum,
/// NaN-propagating max/min, (value, index) under ATen's GreaterOrNan/LessOrNan order, Welford), the generated
/// offset maps kept_off/red_off, and one kernel body per mode. Only thread 0 of an output's group writes it.
#include <sstream>

#include "codegen_common.h"
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {

int64_t chunk_length(const ReduceShape& s, const ReduceKnobs& k) {
  if (k.mode == 2) {
    const int64_t nv = s.length / k.vec;
    return (nv + k.splits - 1) / k.splits;
  }
  return (s.length + k.splits - 1) / k.splits;
}

int64_t tile_count(const ReduceShape& s, const ReduceKnobs& k) {
  const int64_t tile = 32 * int64_t{k.ty};  // vectors of columns per block
  return (s.outputs / k.vec + tile - 1) / tile;
}

int ring_stages(const ReduceShape&, const ReduceKnobs& k) { return k.ring == 0 ? 0 : 4; }

size_t ring_smem_bytes(const ReduceShape& s, const ReduceKnobs& k) {
  return static_cast<size_t>(ring_stages(s, k)) * k.unr * k.ty * k.block * k.vec * elem_size(s.dtype);
}

int64_t counter_bytes(const ReduceShape& s, const ReduceKnobs& k) {
  if (k.mode != 4 || k.unr == 0 || k.splits == 1 || k.cluster > 0) return 0;
  return (tile_count(s, k) * 4 + 15) / 16 * 16;
}

namespace {

// KIND 0: sum/mean; 1: amax/amin; 2: (value, index); 3: var/std. GREATER: max rather than min. ELEM(x): the
// term an element contributes (x; a norm's |x|, x * x, ...), PROJECT(v): the result of the sum (v; sqrtf, ...).
const char* kAccumulators = R"(#define IS_NAN(v) ((v) != (v))
#if KIND == 0
struct acc_t { float v; };
__device__ __forceinline__ acc_t acc_init() { return acc_t{0.f}; }
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) { return acc_t{a.v + b.v}; }
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long) { a.v += ELEM(x); }
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) { return acc_t{__shfl_xor_sync(0xffffffffu, a.v, o)}; }
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) { return acc_t{__ldcg(&p->v)}; }
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long*, index_t o) {
#if MEAN
  y[o] = to_out(a.v * MEAN_FACTOR);  // ATen's MeanOps::project
#else
  y[o] = to_out(PROJECT(a.v));
#endif
}
#elif KIND == 1
// ATen's MaxNanFunctor / MinNanFunctor: NaN propagates.
struct acc_t { float v; };
__device__ __forceinline__ acc_t acc_init() { return acc_t{GREATER ? NEG_INF : POS_INF}; }
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) {
  return (IS_NAN(a.v) || (GREATER ? a.v > b.v : a.v < b.v)) ? a : b;
}
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long) { a = acc_combine(acc_t{ELEM(x)}, a); }
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) { return acc_t{__shfl_xor_sync(0xffffffffu, a.v, o)}; }
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) { return acc_t{__ldcg(&p->v)}; }
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long*, index_t o) { y[o] = to_out(a.v); }
#elif KIND == 2
// ATen's GreaterOrNan / LessOrNan (SharedReduceOps.h): NaN wins, equal values (and NaNs) go to the lower
// index. A total order on (value, index), so the result does not depend on the combine order.
struct acc_t { float v; long long i; };
__device__ __forceinline__ acc_t acc_init() { return acc_t{GREATER ? NEG_INF : POS_INF, 0x7fffffffffffffffLL}; }
__device__ __forceinline__ bool acc_before(const acc_t& a, const acc_t& b) {
  if (IS_NAN(a.v)) return IS_NAN(b.v) ? a.i < b.i : true;
  if (IS_NAN(b.v)) return false;
  return a.v == b.v ? a.i < b.i : (GREATER ? a.v > b.v : a.v < b.v);
}
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) { return acc_before(a, b) ? a : b; }
// Each thread pushes its elements in increasing r, so a new element is "before" the running one only when it is
// strictly greater (smaller), or NaN over a non-NaN, or the running one is still the initial sentinel: the
// same outcome as acc_combine with 32-bit compares on the hot path.
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long r) {
  if (IS_NAN(a.v)) return;
  if (IS_NAN(x) || (GREATER ? x > a.v : x < a.v) || (x == a.v && a.i == 0x7fffffffffffffffLL)) a = acc_t{x, r};
}
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) {
  return acc_t{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
}
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) { return acc_t{__ldcg(&p->v), __ldcg(&p->i)}; }
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long* yi, index_t o) {
#if HAS_VALUES
  y[o] = to_out(a.v);
#endif
  yi[o] = a.i;
}
#else
// ATen's WelfordOps: reduce per element, Chan's combine, project with divisor max(0, n - correction).
typedef Welford acc_t;
__device__ __forceinline__ acc_t acc_init() { return acc_t{0.f, 0.f, 0.f}; }
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) { return wf_combine(a, b); }
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long) {
  const float n = a.n + 1.f, d = x - a.mean, m = a.mean + d / n;
  a = acc_t{n, m, a.m2 + d * (x - m)};
}
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) {
  return acc_t{__shfl_xor_sync(0xffffffffu, a.n, o), __shfl_xor_sync(0xffffffffu, a.mean, o),
               __shfl_xor_sync(0xffffffffu, a.m2, o)};
}
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) {
  return acc_t{__ldcg(&p->n), __ldcg(&p->mean), __ldcg(&p->m2)};
}
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long*, index_t o) {
  const float divisor = a.n > CORRECTION ? a.n - CORRECTION : 0.f;
  const float var = a.m2 / divisor;
#if TAKE_SQRT
  y[o] = to_out(sqrtf(var));
#else
  y[o] = to_out(var);
#endif
}
#endif
__device__ __forceinline__ acc_t warp_combine(acc_t a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a = acc_combine(a, acc_shfl(a, o));
  return a;
}
/// Combines over the whole block; the result is valid in thread 0.
__device__ __forceinline__ acc_t block_combine(acc_t a, acc_t* red) {
  a = warp_combine(a);
#if BLOCK > 32
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  __syncthreads();
  if (l == 0) red[w] = a;
  __syncthreads();
  a = warp_combine(l < BLOCK / 32 ? red[l] : acc_init());
#endif
  return a;
}
// The column tile's running state (mode 4). (value, index) runs in 32 bits (K < 2^31, planned), started as
// (+-inf, the thread's first r): the first push then leaves exactly that element, so each later push in increasing
// r replaces only a strictly greater (smaller) value or a NaN over a non-NaN (GreaterOrNan / LessOrNan with the
// lower index kept): two compares. A thread without rows contributes acc_init(). Other kinds run their acc_t.
#if KIND == 2
struct run_t { float v; int i; };
__device__ __forceinline__ run_t run_init(index_t r) { return run_t{GREATER ? NEG_INF : POS_INF, r}; }
__device__ __forceinline__ void run_push(run_t& a, float x, index_t r) {
  if (a.v == a.v && !(GREATER ? a.v >= x : a.v <= x)) a = run_t{x, r};
}
__device__ __forceinline__ acc_t run_acc(run_t a, bool any) { return any ? acc_t{a.v, (long long)a.i} : acc_init(); }
#else
typedef acc_t run_t;
__device__ __forceinline__ run_t run_init(index_t) { return acc_init(); }
__device__ __forceinline__ void run_push(run_t& a, float x, index_t r) { acc_push(a, x, r); }
__device__ __forceinline__ acc_t run_acc(run_t a, bool) { return a; }
#endif
)";

const char* kBody = R"(struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
/// Reduces vectors j0 + lane, j0 + lane + step, ... < j1 of output o's row (modes 0-2).
__device__ __forceinline__ acc_t row_range(const storage_t* __restrict__ x, index_t o, index_t j0, index_t j1,
                                           int lane, int step) {
  acc_t a = acc_init();
  const index_t base = kept_off(o);
#if VEC > 1
  const vec_t* __restrict__ xv = reinterpret_cast<const vec_t*>(x + base);  // one stride-1 reduced run
#pragma unroll 4
  for (index_t j = j0 + lane; j < j1; j += step) {
    const vec_t t = xv[j];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc_push(a, to_float(t.v[e]), (long long)j * VEC + e);
  }
#else
#pragma unroll 4
  for (index_t j = j0 + lane; j < j1; j += step) acc_push(a, to_float(x[base + red_off(j)]), j);
#endif
  return a;
}
/// Output o's S chunk partials ws[p * O + o] merged in increasing p (the one definition of the merge, shared by
/// the second pass and the last block of a one-launch tile, so both forms give the same bits). ld.global.cg:
/// partials written by other blocks of the same launch are not in this SM's L1.
__device__ __forceinline__ acc_t merge_partials(const acc_t* ws, index_t o) {
  acc_t a = acc_init();
  for (index_t p = 0; p < S; ++p) a = acc_combine(a, acc_ldcg(ws + p * O + o));
  return a;
}
/// Phase 1 of the column modes: output o merges its S chunk partials.
__device__ __forceinline__ void column_second_pass(const acc_t* __restrict__ ws, out_t* __restrict__ y,
                                                   long long* __restrict__ yi) {
  const index_t o = (index_t)blockIdx.x * BLOCK + threadIdx.x;
  if (o >= O) return;
  acc_store(merge_partials(ws, o), y, yi, o);
}
)";

const char* kKernel = R"(extern "C" __global__ void LAUNCH_BOUNDS
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              acc_t* __restrict__ ws, int phase) {
#if MODE == 0
  const int lane = threadIdx.x % 32;
  const index_t o = (index_t)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
  acc_t a = acc_init();
  if (o < O) a = row_range(x, o, 0, NV, lane, 32);
  a = warp_combine(a);
  if (o < O && lane == 0) acc_store(a, y, yi, o);
#elif MODE == 1
  __shared__ acc_t red[32];
  const index_t o = blockIdx.x;
  acc_t a = block_combine(row_range(x, o, 0, NV, threadIdx.x, BLOCK), red);
  if (threadIdx.x == 0) acc_store(a, y, yi, o);
#elif MODE == 2
  // Phase 0: block blk reduces chunk blk % S of row blk / S into ws[blk]; phase 1: block o merges row o's chunks.
  __shared__ acc_t red[32];
  if (phase == 0) {
    const index_t blk = blockIdx.x, o = blk / S, j0 = (blk % S) * CH, j1 = j0 + CH < NV ? j0 + CH : NV;
    const acc_t a = block_combine(row_range(x, o, j0, j1, threadIdx.x, BLOCK), red);
    if (threadIdx.x == 0) ws[blk] = a;
    return;
  }
  const index_t o = blockIdx.x;
  acc_t a = acc_init();
  for (index_t t = threadIdx.x; t < S; t += BLOCK) a = acc_combine(a, ws[o * S + t]);
  a = block_combine(a, red);
  if (threadIdx.x == 0) acc_store(a, y, yi, o);
#elif MODE == 4
  if (phase == 1) return column_second_pass(ws, y, yi);
  column_tile(x, y, yi, ws);
#else
  // Thread (tx, ty) owns outputs c * VEC ... c * VEC + VEC - 1 and reduces r = r0 + ty, r0 + ty + TY, ... of
  // chunk blockIdx.y; the TY partials meet in shared memory; with S > 1 chunks meet in phase 1 (ws[S][O]).
  if (phase == 1) return column_second_pass(ws, y, yi);
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const index_t c = (index_t)blockIdx.x * TX + tx;
  const bool live = c < O / VEC;
  const index_t r0 = (index_t)blockIdx.y * CH, r1 = r0 + CH < K ? r0 + CH : K;
  acc_t a[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) a[e] = acc_init();
  if (live) {
    const index_t base = kept_off(c * VEC);
#pragma unroll 4
    for (index_t r = r0 + ty; r < r1; r += TY) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + base + red_off(r));
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc_push(a[e], to_float(t.v[e]), r);
    }
  }
#if TY > 1
  __shared__ acc_t part[BLOCK * VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) part[threadIdx.x * VEC + e] = a[e];
  __syncthreads();
  if (ty == 0) {
    for (int k = 1; k < TY; ++k) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) a[e] = acc_combine(a[e], part[(k * TX + tx) * VEC + e]);
    }
  }
#endif
  if (ty == 0 && live) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const index_t o = c * VEC + e;
      if (S == 1) acc_store(a[e], y, yi, o);
      else ws[(index_t)blockIdx.y * O + o] = a[e];
    }
  }
#endif
}
)";

/// `name(i)`: the offset of row-major index i over dims (sizes, strides), outermost first; constants inlined.
void offset_map(std::ostringstream& o, const char* name, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides) {
  o << "__device__ __forceinline__ index_t " << name << "(index_t i) {\n  index_t off = 0;\n";
  for (size_t d = sizes.size(); d-- > 1;)
    o << "  off += (i % " << sizes[d] << ") * " << strides[d] << "; i /= " << sizes[d] << ";\n";
  if (!sizes.empty()) o << "  off += i * " << strides[0] << ";\n";
  o << "  return off;\n}\n";
}

std::string float_bits(float f) { return "__int_as_float(" + float_bits_hex(f) + ")"; }

int kind_of(const ReduceShape& s) {
  switch (s.op) {
    case Reduction::kSum: case Reduction::kMean: return 0;
    case Reduction::kAmax: case Reduction::kAmin: return 1;
    case Reduction::kVar: case Reduction::kStd: return 3;
    case Reduction::kNorm: return s.ord == NormOrd::kInf || s.ord == NormOrd::kNegInf ? 1 : 0;
    default: return 2;
  }
}

/// `out_t`, `to_out(float)`, and the ELEM / PROJECT macros of the accumulators (a norm's term and projection as
/// ATen's NormZeroOps ... NormOps compute them in fp32; identity for the other ops).
void elem_and_projection(std::ostringstream& o, const ReduceShape& s) {
  if (s.out_dtype == s.dtype) {
    o << "typedef storage_t out_t;\n#define to_out to_storage\n";
  } else {  // a norm's dtype=float of fp16/bf16 input
    o << "typedef float out_t;\n__device__ __forceinline__ float to_out(float f) { return f; }\n";
  }
  const char* elem = "(x)";
  const char* project = "(v)";
  if (s.op == Reduction::kNorm) {
    switch (s.ord) {
      case NormOrd::kZero: elem = "((x) == 0.f ? 0.f : 1.f)"; break;  // NaN counts
      case NormOrd::kOne: case NormOrd::kInf: case NormOrd::kNegInf: elem = "fabsf(x)"; break;
      case NormOrd::kTwo: elem = "((x) * (x))", project = "sqrtf(v)"; break;
      case NormOrd::kP: elem = "powf(fabsf(x), NORM_P)", project = "powf((v), NORM_INV_P)"; break;
    }
  }
  // ATen: pow(|x|, acc_t(p)) and pow(s, acc_t(1.0) / acc_t(p)), the division in fp32.
  o << "#define NORM_P " << float_bits(s.norm_p) << "\n#define NORM_INV_P " << float_bits(1.f / s.norm_p)
    << "\n#define ELEM(x) " << elem << "\n#define PROJECT(v) " << project << "\n";
}

}  // namespace

KernelSource generate_reduce(const ReduceShape& s, const ReduceKnobs& k) {
  const Reduction op = s.op;
  const bool greater = op == Reduction::kAmax || op == Reduction::kMaxDim || op == Reduction::kArgmax ||
                       (op == Reduction::kNorm && s.ord == NormOrd::kInf);
  std::ostringstream o;
  o << "// cudal1 reduce: op=" << static_cast<int>(op) << " " << c10::toString(s.dtype) << " O=" << s.outputs
    << " K=" << s.length << " mode=" << k.mode << " vec=" << k.vec << " block=" << k.block << " splits=" << k.splits
    << " ty=" << k.ty << " unr=" << k.unr << " cluster=" << k.cluster << " ring=" << k.ring << "\n";
  o << "typedef int index_t;  // extent < 2^31 (planned)\n" << dtype_prelude(s.dtype);
  elem_and_projection(o, s);
  o << "#define NEG_INF __int_as_float(0xff800000u)\n#define POS_INF __int_as_float(0x7f800000u)\n";
  o << "#define KIND " << kind_of(s) << "\n#define GREATER " << (greater ? 1 : 0) << "\n#define MEAN "
    << (op == Reduction::kMean ? 1 : 0) << "\n#define HAS_VALUES " << (s.has_values() ? 1 : 0)
    << "\n#define TAKE_SQRT " << (op == Reduction::kStd ? 1 : 0) << "\n#define MEAN_FACTOR "
    << float_bits(s.mean_factor) << "\n#define CORRECTION " << float_bits(s.correction) << "\n";
  o << "#define MODE " << k.mode << "\n#define VEC " << k.vec << "\n#define BLOCK " << k.block << "\n#define TY "
    << k.ty << "\n#define TX (BLOCK / TY)\n#define NW (BLOCK / 32)\n#define CPT " << k.ty
    << "\n#define PIPE " << (k.unr > 0 ? 1 : 0) << "\n#define UNR "
    << (k.unr > 0 ? std::to_string(k.unr) : std::string("(CPT * VEC >= 2 ? 4 : 8)")) << "\n#define ONE_LAUNCH "
    << (counter_bytes(s, k) > 0 ? 1 : 0) << "\n#define CNT_BYTES " << counter_bytes(s, k)
    << "\n#define S ((index_t)" << k.splits << ")\n#define O ((index_t)"
    << s.outputs << ")\n#define K ((index_t)" << s.length << ")\n#define NV ((index_t)"
    << (k.mode >= 3 ? s.length : s.length / k.vec) << ")\n#define CH ((index_t)"
    << (k.mode >= 2 ? chunk_length(s, k) : 1) << ")\n#define TILE (32 * CPT * VEC)\n#define CLUSTER "
    << (k.cluster > 0 ? 1 : 0) << "\n";
  // Cluster tiles are held to 64 registers a thread (1024 resident threads per SM, Note [Column tiles in
  // clusters]); the other variants keep the bare bound their timings were measured with.
  if (k.cluster > 0)
    o << "#define LAUNCH_BOUNDS __launch_bounds__(BLOCK, " << kClusterTileThreadsPerSm / k.block << ")\n"
      << cluster_primitives_source();
  else
    o << "#define LAUNCH_BOUNDS __launch_bounds__(BLOCK)\n";
  o << "#define RING " << ring_stages(s, k) << "\n#define VEC_BYTES " << k.vec * elem_size(s.dtype) << "\n";
  offset_map(o, "kept_off", s.kept_sizes, s.kept_strides);
  offset_map(o, "red_off", s.red_sizes, s.red_strides);
  o << welford_source() << kAccumulators << kBody << (k.ring > 0 ? async_copy_source() : "") << column_tile_source()
    << kKernel;
  return KernelSource{o.str(), "cudal1_reduce"};
}

}  // namespace cudal1::optimizer::reduce
