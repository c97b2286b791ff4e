/// @brief Kernel bodies of the two single-pass scan techniques (Note [Scans], "Reaching the memory floor"):
/// kRowLanes (ATen's tile-of-32 association with a tile per lane) and kColumnLookback (columns split along the
/// dimension, chunk totals published and summed by later chunks in one launch).
#include "scan_family.h"

namespace cudal1::optimizer::scan {

const char* row_lanes_source() {
  return R"(#if STAGED
/// Loads the warp's next 32 tiles coalesced: rs[k] is element `lane` of lane k's tile (row row0 + k / SPLITS).
__device__ __forceinline__ void load_staged(const storage_t* x, const index_t* roff, index_t row0, index_t b,
                                            int lane, storage_t* rs) {
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const index_t j = b + 32 * (k % SPLITS) + lane;
    rs[k] = row0 + k / SPLITS < OUTER && j < N ? x[roff[k / SPLITS] + j] : lv_to(LV_IDENT);
  }
}
#else
/// Loads the 32 elements of one tile (VEC per load; pads past the row with the identity).
__device__ __forceinline__ void load_tile(const storage_t* x, index_t j0, bool live, vec_t* raw) {
#pragma unroll
  for (int i = 0; i < 32 / VEC; ++i) {
    const index_t j = j0 + i * VEC;
    if (live && j < N) {
#if VEC > 1
      raw[i] = *reinterpret_cast<const vec_t*>(x + j);
#else
      raw[i].v[0] = x[j * SD];
#endif
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) raw[i].v[e] = lv_to(LV_IDENT);
    }
  }
}
/// AHEAD > 1: loads the 32 elements of one tile with no predicate (an index past the row reads element 0
/// instead), so that no instruction but the load writes `raw`; the step picks the identity past the row at use.
__device__ __forceinline__ void load_tile_clamped(const storage_t* x, index_t j0, vec_t* raw) {
#pragma unroll
  for (int i = 0; i < 32 / VEC; ++i) {
    const index_t j = j0 + i * VEC;
    raw[i] = *reinterpret_cast<const vec_t*>(x + (j < N ? j : 0));
  }
}
#endif
/// The tile's last element from its carry: the combines on the path c -> 0 -> 1 -> 3 -> 7 -> 15 -> 31.
__device__ __forceinline__ lv_t chain_total(const lv_t* a, lv_t c) {
  c = lv_op(a[0], c);
  c = lv_op(a[1], c);
  c = lv_op(a[3], c);
  c = lv_op(a[7], c);
  c = lv_op(a[15], c);
  return lv_op(a[31], c);
}
)";
}

const char* row_lanes_body() {
  return R"(  // SPLITS lanes per row, each holding one tile of 32 (ATen's 2 x Tx, Tx = 16) of the row's next 32 x SPLITS
  // elements. A lane runs the combines of the tile's Sklansky scan that do not involve element 0 (every step of
  // element e but the one at its highest bit), passes the carry through the path 0, 1, 3, 7, 15, 31 to the next
  // lane (six combines per tile on the serial path, no shuffle inside the tile), then finishes each element
  // e > 0 as OP(a[e], out[2^hb(e) - 1]): the combines kRowExact (and ATen) make, with the same operands.
  // STAGED (contiguous rows, VEC 1): loads and stores coalesced, transposed through shared memory (33 values a
  // lane: conflict-free both ways); otherwise each lane loads its own tile, VEC elements at a time. Values are
  // lv_t: fp32 rounded to the dtype after every combine, or the dtype's own bits (knob nat, Note [Scans]).
  const int lane = threadIdx.x & 31, t = lane % SPLITS;
  const index_t row0 = ((index_t)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32) * (32 / SPLITS);
  if (row0 >= OUTER) return;  // whole warps leave together; the others keep every lane for the shuffles
  const index_t row = row0 + lane / SPLITS;
  const bool live = row < OUTER;
  const int seg = lane & ~(SPLITS - 1);  // first lane of this row's segment
#if STAGED
  __shared__ lv_t stage[BLOCK / 32][32 * 33];
  lv_t* sw = stage[threadIdx.x / 32];
  const index_t my_off = in_base(live ? row : row0, 0);
  index_t roff[32 / SPLITS];  // input offsets of the warp's rows
#pragma unroll
  for (int r = 0; r < 32 / SPLITS; ++r) roff[r] = __shfl_sync(FULL, my_off, r * SPLITS);
  storage_t rs[32];
  load_staged(in, roff, row0, 0, lane, rs);
#else
  const storage_t* x = in + in_base(live ? row : row0, 0);
#if STAGED_STORES
  // A step's outputs of the warp: lane k's tile as CPL vectors at sv[k * (CPL + 1) + i] (one vector of padding
  // a lane: the vector writes and the row-order reads then meet at most two to a bank group).
  constexpr int CPL = 32 / VEC;
  __shared__ vec_t stage_out[BLOCK / 32][32 * (CPL + 1)];
  vec_t* sv = stage_out[threadIdx.x / 32];
#else
  storage_t* y = out + (live ? row : row0) * N;
#endif
#if AHEAD > 1
  vec_t raw[AHEAD][32 / VEC];  // tiles of the next AHEAD steps, in flight
#pragma unroll
  for (int h = 0; h < AHEAD; ++h) load_tile_clamped(x, (index_t)(h * SPLITS + t) * 32, raw[h]);
#else
  vec_t raw[32 / VEC];
  load_tile(x, (index_t)t * 32, live, raw);
#endif
#endif
  lv_t carry = LV_IDENT;
#if AHEAD > 1
  for (index_t base0 = 0; base0 < N; base0 += 32 * SPLITS * AHEAD)
#pragma unroll
  for (int h = 0; h < AHEAD; ++h) {  // raw[h] is a register tile: h is a constant in each unrolled copy
    const index_t base = base0 + (index_t)h * 32 * SPLITS;
    if (base >= N) break;
#else
  for (index_t base = 0; base < N; base += 32 * SPLITS) {
#endif
    lv_t a[32];
#if AHEAD > 1
#pragma unroll
    for (int i = 0; i < 32 / VEC; ++i) {
      const bool in_row = live && base + (index_t)t * 32 + i * VEC < N;
#pragma unroll
      for (int e = 0; e < VEC; ++e) a[i * VEC + e] = in_row ? lv_from(raw[h][i].v[e]) : LV_IDENT;
    }
    load_tile_clamped(x, base + (index_t)(AHEAD * SPLITS + t) * 32, raw[h]);
#elif STAGED
#pragma unroll
    for (int k = 0; k < 32; ++k) sw[33 * k + lane] = lv_from(rs[k]);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < 32; ++e) a[e] = sw[33 * lane + e];
    __syncwarp();
    load_staged(in, roff, row0, base + 32 * SPLITS, lane, rs);  // the next tiles, in flight meanwhile
#else
#pragma unroll
    for (int i = 0; i < 32 / VEC; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e) a[i * VEC + e] = lv_from(raw[i].v[e]);
    load_tile(x, base + 32 * SPLITS + (index_t)t * 32, live, raw);  // the next tiles, in flight meanwhile
#endif
#pragma unroll
    for (int l = 0; l < 5; ++l)  // Sklansky step s = 2^l, fixed trip counts so that a[] stays in registers
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        const int s = 1 << l;
        if ((e & s) && e >= 2 * s) a[e] = lv_op(a[e], a[(e & ~(2 * s - 1)) | (s - 1)]);
      }
    lv_t c = carry, cin = carry;
#pragma unroll
    for (int q = 0; q < SPLITS; ++q) {
      if (t == q) cin = c;
      c = lv_shfl(chain_total(a, c), seg | q);
    }
    carry = c;
    a[0] = lv_op(a[0], cin);
#pragma unroll
    for (int e = 1; e < 32; ++e) {
      const int p = e >= 16 ? 16 : e >= 8 ? 8 : e >= 4 ? 4 : e >= 2 ? 2 : 1;  // highest power of two <= e
      a[e] = lv_op(a[e], a[p - 1]);
    }
#if STAGED
#pragma unroll
    for (int e = 0; e < 32; ++e) sw[33 * lane + e] = a[e];
    __syncwarp();
#pragma unroll
    for (int k = 0; k < 32; ++k) {
      const index_t j = base + 32 * (k % SPLITS) + lane;
      if (row0 + k / SPLITS < OUTER && j < N) out[(row0 + k / SPLITS) * N + j] = lv_to(sw[33 * k + lane]);
    }
    __syncwarp();
#elif STAGED_STORES
    // Whole-sector stores (Note [Scans]): the lanes' tiles into shared memory, then store i of lane L writes
    // vector c = 32 i + L of the warp's step in row-major order (row r = c / (SPLITS x CPL) of the warp), so each
    // store instruction writes SPLITS x 32 (or 32 x VEC) contiguous elements instead of a 16-byte piece of 32 tiles.
    __syncwarp();  // every lane has read the previous step's vectors
#pragma unroll
    for (int i = 0; i < CPL; ++i) {
      vec_t r;
#pragma unroll
      for (int e = 0; e < VEC; ++e) r.v[e] = lv_to(a[i * VEC + e]);
      sv[lane * (CPL + 1) + i] = r;
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < CPL; ++i) {
      const int c = i * 32 + lane, r = c / (SPLITS * CPL), cc = c % (SPLITS * CPL);
      const index_t rr = row0 + r, j = base + (index_t)cc * VEC;
      if (rr < OUTER && j < N)
        *reinterpret_cast<vec_t*>(out + rr * N + j) = sv[(r * SPLITS + cc / CPL) * (CPL + 1) + cc % CPL];
    }
#else
#pragma unroll
    for (int i = 0; i < 32 / VEC; ++i) {
      const index_t j = base + (index_t)t * 32 + i * VEC;
      if (!live || j >= N) continue;
#if VEC > 1
      vec_t r;
#pragma unroll
      for (int e = 0; e < VEC; ++e) r.v[e] = lv_to(a[i * VEC + e]);
      *reinterpret_cast<vec_t*>(y + j) = r;
#else
      y[j] = lv_to(a[i]);
#endif
    }
#endif
  }
)";
}

const char* column_lookback_body() {
  return R"(  // A tile of 32 x VEC columns x CH rows (BLOCK / 32 warps of R = SPLITS rows each). Tile (chunk c, column
  // group g) is blockIdx.x = c * GROUPS + g, so a chunk's predecessors have lower block indices and were
  // dispatched first (the same assumption as CUB's single-pass scans): every tile publishes its column totals
  // before it waits, and waits only on lower chunks, so some waited-on tile is always running or done.
  // A status word is (1 << 32) | float bits; the workspace is zeroed before the launch (0 = not yet).
  __shared__ float tot[NW][32 * VEC], part[NW][32 * VEC];
  volatile unsigned long long* st = reinterpret_cast<volatile unsigned long long*>(ws);
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const index_t c = blockIdx.x / GROUPS, g = blockIdx.x % GROUPS;
  const index_t col = (g * 32 + tx) * VEC;
  const bool live = col < LINES;
  const index_t o = live ? col / INNER : 0, i = live ? col % INNER : 0;
  const storage_t* x = in + in_base(o, i);
  storage_t* y = out + o * N * INNER + i;
  const index_t lo = c * CH + (index_t)ty * SPLITS;
  float v[SPLITS][VEC];
#pragma unroll
  for (int r = 0; r < SPLITS; ++r) {
    const index_t k = lo + r;
    if (live && k < N) {
#if VEC > 1
      const vec_t t = *reinterpret_cast<const vec_t*>(x + k * SD);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[r][e] = to_float(t.v[e]);
#else
      v[r][0] = to_float(x[k * SD]);
#endif
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[r][e] = IDENT;
    }
  }
#pragma unroll
  for (int r = 1; r < SPLITS; ++r)
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[r][e] = OP(v[r - 1][e], v[r][e]);
#pragma unroll
  for (int e = 0; e < VEC; ++e) tot[ty][tx * VEC + e] = v[SPLITS - 1][e];
  __syncthreads();
  if (ty == 0 && live && c + 1 < CHUNKS) {  // publish this chunk's column totals
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float a = IDENT;
      for (int w = 0; w < NW; ++w) a = OP(a, tot[w][tx * VEC + e]);
      st[c * LINES + col + e] = (1ull << 32) | __float_as_uint(a);
    }
  }
  // Warp w sums the totals of chunks w, w + NW, ... below c (a fixed order: the result does not depend on timing).
  float pre[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) pre[e] = IDENT;
  if (live)
    for (index_t p = ty; p < c; p += NW) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        unsigned long long w = st[p * LINES + col + e];
        while ((w >> 32) == 0) {
#if __CUDA_ARCH__ >= 700
          __nanosleep(64);
#endif
          w = st[p * LINES + col + e];
        }
        pre[e] = OP(pre[e], __uint_as_float((unsigned)w));
      }
    }
#pragma unroll
  for (int e = 0; e < VEC; ++e) part[ty][tx * VEC + e] = pre[e];
  __syncthreads();
  // Exclusive prefix of this thread's rows: earlier chunks (warp partials in order), then earlier warps' rows.
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    float a = IDENT;
    for (int w = 0; w < NW; ++w) a = OP(a, part[w][tx * VEC + e]);
    for (int w = 0; w < ty; ++w) a = OP(a, tot[w][tx * VEC + e]);
    pre[e] = a;
  }
  if (!live) return;
#pragma unroll
  for (int r = 0; r < SPLITS; ++r) {
    const index_t k = lo + r;
    if (k >= N) break;
#if VEC > 1
    vec_t t;
#pragma unroll
    for (int e = 0; e < VEC; ++e) t.v[e] = to_storage(OP(pre[e], v[r][e]));
    *reinterpret_cast<vec_t*>(y + k * INNER) = t;
#else
    y[k * INNER] = to_storage(OP(pre[0], v[r][0]));
#endif
  }
)";
}

}  // namespace cudal1::optimizer::scan
