/// @brief adaptive_avg_pool2d with uniform windows over a dense NCHW input, staged through shared memory in
/// coalesced 16-byte vectors (knob flat, Note [Pooling adaptive staging]).
#include <algorithm>
#include <numeric>
#include <sstream>

#include "codegen_common.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {
namespace {

/// The kernel after its macros (AKH, AKW, RE, RB, VE, CHUNK, NV, ROWS, TOTAL): Note [Pooling adaptive staging].
constexpr const char* kStaged = R"(extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  // Block b: output rows [b * RB, b * RB + RB) of the flat (plane, output row) order, whose inputs are the
  // contiguous CHUNK elements from b * RB * RE (a multiple of VE: 16-byte aligned with the tensor).
  __shared__ __align__(16) storage_t tile[CHUNK];
  const index_t r0 = (index_t)blockIdx.x * RB;
  const storage_t* __restrict__ x = in + r0 * RE;
  const index_t left = TOTAL - r0 * RE;  // elements from x to the tensor's end
  struct __align__(16) v16_t { unsigned u[4]; };
  // Every load first (predicated, in flight together), then the shared-memory stores; a vector past the
  // tensor's end (the last block, where TOTAL is not a multiple of VE) is copied element by element.
  v16_t buf[NV];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int v = k * BLOCK + threadIdx.x;
    if (v < CHUNK / VE && (index_t)v * VE + VE <= left) buf[k] = *reinterpret_cast<const v16_t*>(x + (index_t)v * VE);
  }
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int v = k * BLOCK + threadIdx.x;
    if (v >= CHUNK / VE) break;
    const index_t e = (index_t)v * VE;
    if (e + VE <= left) {
      *reinterpret_cast<v16_t*>(tile + v * VE) = buf[k];
    } else {
#pragma unroll
      for (int j = 0; j < VE; ++j)
        if (e + j < left) tile[v * VE + j] = x[e + j];
    }
  }
  __syncthreads();
  // Output o of the block: row o / OW, column o % OW; the output is dense, so consecutive threads store
  // consecutive elements. ATen's sum (rows outer, columns inner, from +0) and its two divisions.
  storage_t* __restrict__ y = out + r0 * OW;
  const int outs = (int)min((index_t)RB, ROWS - r0) * OW;
  for (int o = threadIdx.x; o < outs; o += BLOCK) {
    const storage_t* __restrict__ p = tile + (o / OW) * RE + (o % OW) * AKW;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < AKH; ++i)
#pragma unroll
      for (int j = 0; j < AKW; ++j) sum += to_float(p[i * W + j]);
    y[o] = to_storage(sum / AKH / AKW);
  }
}
)";

}  // namespace

bool flat_fits(const PoolShape& s) {
  if (s.kind != PoolKind::kAdaptiveAvg || s.h % s.oh || s.w % s.ow) return false;
  // A thread sums its window serially, fully unrolled: small windows only (a global pooling would leave one
  // thread of a block summing a whole plane).
  if ((s.h / s.oh) * (s.w / s.ow) > kMaxPatch) return false;
  // Dense NCHW: every dim of size > 1 has the contiguous stride (so (plane, output row) blocks are contiguous).
  const int64_t sizes[] = {s.n, s.c, s.h, s.w}, strides[] = {s.sn, s.sc, s.sh, s.sw};
  int64_t want = 1;
  for (int d = 3; d >= 0; --d) {
    if (sizes[d] > 1 && strides[d] != want) return false;
    want *= sizes[d];
  }
  return true;
}

FlatGeometry flat_geometry(const PoolShape& s, const PoolKnobs& k) {
  FlatGeometry g;
  const int64_t es = elem_size(s.dtype), ve = 16 / es;
  g.row_elems = (s.h / s.oh) * s.w;
  const int64_t align = ve / std::gcd(ve, g.row_elems);  // rows whose inputs are whole vectors
  const int64_t target = static_cast<int64_t>(k.block) * k.flat * ve / g.row_elems / align * align;
  g.rows = std::max(align, target);
  g.bytes = g.rows * g.row_elems * es;
  g.blocks = (s.n * s.c * s.oh + g.rows - 1) / g.rows;
  return g;
}

std::string flat_kernel_source(const PoolShape& s, const PoolKnobs& k) {
  const FlatGeometry g = flat_geometry(s, k);
  std::ostringstream o;
  o << "#define AKH " << s.h / s.oh << "\n#define AKW " << s.w / s.ow << "\n#define RE " << g.row_elems
    << "\n#define RB " << g.rows << "\n#define VE " << 16 / elem_size(s.dtype)
    << "\n#define CHUNK (RB * RE)\n#define NV ((CHUNK / VE + BLOCK - 1) / BLOCK)"
    << "\n#define ROWS " << s.n * s.c * s.oh << "LL\n#define TOTAL " << s.n * s.c * s.h * s.w << "LL\n"
    << kStaged;
  return o.str();
}

}  // namespace cudal1::optimizer::pool
