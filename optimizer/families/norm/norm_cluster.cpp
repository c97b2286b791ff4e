/// @brief Mode 4 of the normalisation family: a row split over one thread-block cluster whose blocks keep their
/// slice on chip between the statistics and the output (Note [Norm clusters]): slice sizing and device code.
#include <algorithm>

#include "codegen_common.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

// H200 (sm_90) shared memory: 228 KB per SM, at most 227 KB per block, 1 KB per resident block reserved by the
// system; 512 bytes cover the kernel's static arrays (red[96] and the published triples, 408 bytes).
constexpr int64_t kSmemPerSm = 228 * 1024;
constexpr int64_t kSmemPerBlock = 227 * 1024;
constexpr int64_t kReservedPerBlock = 1024;
constexpr int64_t kStaticSmem = 512;

int64_t smem_budget(int occ) {
  return std::min(kSmemPerBlock, kSmemPerSm / occ - kReservedPerBlock) - kStaticSmem;
}

}  // namespace

int64_t cluster_slice_vectors(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec;
  return (nv + k.cluster - 1) / k.cluster;
}

int64_t cluster_vectors_per_thread(const NormShape& s, const NormKnobs& k) {
  return (cluster_slice_vectors(s, k) + k.block - 1) / k.block;
}

int cluster_registers(const NormShape& s, const NormKnobs& k) {
  if (k.occ * k.block > 1024) return -1;  // 2 x 1024 threads would leave 32 registers a thread
  const int64_t vbytes = int64_t{k.vec} * elem_size(s.dtype);
  const int64_t in_smem = smem_budget(k.occ) / (k.block * vbytes);
  const int64_t regs = std::max<int64_t>(0, cluster_vectors_per_thread(s, k) - in_smem);
  return regs * vbytes > kMaxClusterRegisterBytes ? -1 : static_cast<int>(regs);
}

unsigned cluster_smem_bytes(const NormShape& s, const NormKnobs& k) {
  const int64_t vbytes = int64_t{k.vec} * elem_size(s.dtype);
  const int64_t regs = std::max(0, cluster_registers(s, k));
  return static_cast<unsigned>((cluster_vectors_per_thread(s, k) - regs) * k.block * vbytes);
}

const char* cluster_source() {
  return R"(extern __shared__ __align__(16) unsigned char slice_smem[];
/// This thread's vector i of the slice [j0, j1) is j0 + threadIdx.x + i * BLOCK; vectors 0..REGS-1 stay in c,
/// the others in shared memory at (i - REGS) * BLOCK + threadIdx.x: a thread only reads back what it copied,
/// so no block barrier orders the copies. Returns the thread's Welford triple (in vector order, as mode 2).
__device__ __forceinline__ Welford slice_in(const vec_t* __restrict__ xr, index_t j0, index_t j1, vec_t* c,
                                            vec_t* sm) {
  const index_t base = j0 + threadIdx.x;
  // Two copy groups: the first half's statistics overlap the second half's arrival.
#pragma unroll 4
  for (int i = REGS; i < SPT; ++i) {
    const index_t j = base + (index_t)i * BLOCK;
    if (j < j1) copy_in(sm + (i - REGS) * BLOCK + threadIdx.x, xr + j);
    if (i == HALF - 1) copy_commit();
  }
  copy_commit();
#pragma unroll
  for (int i = 0; i < REGS; ++i) {
    const index_t j = base + (index_t)i * BLOCK;
    if (j < j1) c[i] = xr[j];
  }
  Welford acc{0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < REGS; ++i)
    if (base + (index_t)i * BLOCK < j1) acc = wf_combine(acc, wf_vector(c[i]));
  copy_wait<1>();  // the first group (vectors REGS..HALF-1) has landed
#pragma unroll 4
  for (int i = REGS; i < SPT; ++i) {
    if (i == HALF) copy_wait<0>();
    if (base + (index_t)i * BLOCK < j1) acc = wf_combine(acc, wf_vector(sm[(i - REGS) * BLOCK + threadIdx.x]));
  }
  return acc;
}
/// Normalises this thread's vectors of the slice (kept by slice_in) into row `row` of y.
__device__ __forceinline__ void slice_out(const storage_t* __restrict__ w, const storage_t* __restrict__ b,
                                          vec_t* __restrict__ yr, index_t row, index_t j0, index_t j1,
                                          const vec_t* c, const vec_t* sm, float mean, float rstd) {
  float wv[VEC], bv[VEC];
  const index_t base = j0 + threadIdx.x;
#pragma unroll
  for (int i = 0; i < REGS; ++i) {
    const index_t j = base + (index_t)i * BLOCK;
    if (j < j1) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(c[i], mean, rstd, wv, bv);
    }
  }
#pragma unroll 4
  for (int i = REGS; i < SPT; ++i) {
    const index_t j = base + (index_t)i * BLOCK;
    if (j < j1) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(sm[(i - REGS) * BLOCK + threadIdx.x], mean, rstd, wv, bv);
    }
  }
}
/// Rows of the cluster blockIdx.x / CL, CL blocks each holding one slice: block statistics, published in this
/// block's shared memory (two slots, alternating by row: one cluster barrier a row suffices, since a slot is
/// rewritten only after every block has passed the next row's barrier, i.e. finished reading it); after the
/// barrier every warp merges the CL triples in rank order through distributed shared memory (the same inputs
/// and the same shuffle tree in every warp of every block: identical statistics), then normalises its slice.
__device__ __forceinline__ void cluster_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                             const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                             stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                             float* red) {
  __shared__ float pub[2][3];
  vec_t* const sm = reinterpret_cast<vec_t*>(slice_smem);
  vec_t c[REGS > 0 ? REGS : 1];
  const unsigned rank = cluster_rank();
  const index_t j0 = (index_t)rank * CHV, j1 = j0 + CHV < NV ? j0 + CHV : NV;  // j1 < j0: an empty slice
  const index_t clusters = gridDim.x / CL;
  int slot = 0;
  for (index_t row = blockIdx.x / CL; row < ROWS; row += clusters, slot ^= 1) {
    Welford acc = slice_in(reinterpret_cast<const vec_t*>(x + row * COLS), j0, j1, c, sm);
    acc = row_welford(acc, red);
    if (threadIdx.x == 0) {
      pub[slot][0] = acc.n;
      pub[slot][1] = acc.mean;
      pub[slot][2] = acc.m2;
    }
    cluster_sync();
    const unsigned l = threadIdx.x % 32;
    Welford t{0.f, 0.f, 0.f};
    if (l < CL)
      t = Welford{load_remote(&pub[slot][0], l), load_remote(&pub[slot][1], l), load_remote(&pub[slot][2], l)};
    t = warp_welford(t);
    const float mean = t.mean, rstd = rsqrtf(t.m2 / (float)COLS + EPS);
    if (rank == 0 && threadIdx.x == 0) {
      mean_out[row] = to_stat(mean);
      rstd_out[row] = to_stat(rstd);
    }
    slice_out(w, b, reinterpret_cast<vec_t*>(y + row * COLS), row, j0, j1, c, sm, used_stat(mean), used_stat(rstd));
  }
  cluster_sync();  // no block leaves while another may still read its published triples
}
)";
}

}  // namespace cudal1::optimizer::norm
