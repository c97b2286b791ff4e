// @brief RowLanes (Note [Scans]; exact where s.row_exact): ATen's tile-of-32 association (2 x Tx, Tx = 16) with a
// tile per lane and kLanes lanes per row, each lane holding one tile of the row's next 32 x kLanes elements. A
// lane runs the combines of its tile's Sklansky scan that do not involve element 0 (every step of element e but
// the one at its highest bit), passes the carry through the path 0, 1, 3, 7, 15, 31 to the next lane (six
// combines per tile on the serial path, no shuffle inside the tile), then finishes each element e > 0 as
// lv_op(a[e], out[2^hb(e) - 1]): the combines RowExact (and ATen) make, with the same operands. Values are lv_t
// (scan_lane_values.cuh or scan_lane_values_native.cuh). Follows scan_common.cuh and its constants:
//   int kLanes           lanes per row (4, 8 or 16)
//   bool kStaged         contiguous rows, kVec 1: loads and stores coalesced, transposed through shared memory
//                        (33 values a lane: conflict-free both ways); else each lane loads its own tile, kVec
//                        elements at a time
//   int kAhead           steps whose tiles are in flight (Note [Scans], "Loads ahead"; > 1 only with vector loads)
//   bool kStagedStores   a step's outputs go through shared memory so that each store instruction writes whole
//                        sectors (Note [Scans], "Whole-sector stores"; only with vector loads)

namespace scan {

static_assert(!(kStagedStores && kAhead > 1), "whole-sector stores one step ahead only");

/// Loads the warp's next 32 tiles coalesced: rs[k] is element `lane` of lane k's tile (row row0 + k / kLanes).
__device__ __forceinline__ void load_staged(const storage_t* x, const index_t* roff, index_t row0, index_t b,
                                            int lane, storage_t* rs) {
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const index_t j = b + 32 * (k % kLanes) + lane;
    rs[k] = row0 + k / kLanes < kOuter && j < kN ? x[roff[k / kLanes] + j] : lv_to(lv_ident());
  }
}

/// Loads the 32 elements of one tile (kVec per load; pads past the row with the identity).
__device__ __forceinline__ void load_tile(const storage_t* x, index_t j0, bool live, vec_t* raw) {
#pragma unroll
  for (int i = 0; i < 32 / kVec; ++i) {
    const index_t j = j0 + i * kVec;
    if (live && j < kN) {
      if constexpr (kVec > 1)
        raw[i] = *reinterpret_cast<const vec_t*>(x + j);
      else
        raw[i].v[0] = x[j * kSd];
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) raw[i].v[e] = lv_to(lv_ident());
    }
  }
}

/// kAhead > 1: loads the 32 elements of one tile with no predicate (an index past the row reads element 0
/// instead), so that no instruction but the load writes `raw`; the step picks the identity past the row at use.
__device__ __forceinline__ void load_tile_clamped(const storage_t* x, index_t j0, vec_t* raw) {
#pragma unroll
  for (int i = 0; i < 32 / kVec; ++i) {
    const index_t j = j0 + i * kVec;
    raw[i] = *reinterpret_cast<const vec_t*>(x + (j < kN ? j : 0));
  }
}

/// The tile's last element from its carry: the combines on the path c -> 0 -> 1 -> 3 -> 7 -> 15 -> 31.
__device__ __forceinline__ lv_t chain_total(const lv_t* a, lv_t c) {
  c = lv_op(a[0], c);
  c = lv_op(a[1], c);
  c = lv_op(a[3], c);
  c = lv_op(a[7], c);
  c = lv_op(a[15], c);
  return lv_op(a[31], c);
}

/// One step of the lane's tile a[] (lane t of its row's segment starting at lane `seg`): the Sklansky combines
/// without element 0, the carry through the segment's lanes (carry advances by the step's total), then the
/// combines with element 0's prefix.
__device__ __forceinline__ void scan_tile(lv_t* a, lv_t& carry, int t, int seg) {
#pragma unroll
  for (int l = 0; l < 5; ++l)  // Sklansky step s = 2^l, fixed trip counts so that a[] stays in registers
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const int s = 1 << l;
      if ((e & s) && e >= 2 * s) a[e] = lv_op(a[e], a[(e & ~(2 * s - 1)) | (s - 1)]);
    }
  lv_t c = carry, cin = carry;
#pragma unroll
  for (int q = 0; q < kLanes; ++q) {
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
}

}  // namespace scan

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  const int lane = threadIdx.x & 31, t = lane % kLanes;
  const index_t row0 = ((index_t)blockIdx.x * (kBlock / 32) + threadIdx.x / 32) * (32 / kLanes);
  if (row0 >= kOuter) return;  // whole warps leave together; the others keep every lane for the shuffles
  const index_t row = row0 + lane / kLanes;
  const bool live = row < kOuter;
  const int seg = lane & ~(kLanes - 1);  // first lane of this row's segment
  lv_t carry = lv_ident();
  if constexpr (kStaged) {
    __shared__ lv_t stage[kWarps][32 * 33];
    lv_t* sw = stage[threadIdx.x / 32];
    const index_t my_off = in_base(live ? row : row0, 0);
    index_t roff[32 / kLanes];  // input offsets of the warp's rows
#pragma unroll
    for (int r = 0; r < 32 / kLanes; ++r) roff[r] = __shfl_sync(kFull, my_off, r * kLanes);
    storage_t rs[32];
    load_staged(in, roff, row0, 0, lane, rs);
    for (index_t base = 0; base < kN; base += 32 * kLanes) {
      lv_t a[32];
#pragma unroll
      for (int k = 0; k < 32; ++k) sw[33 * k + lane] = lv_from(rs[k]);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 32; ++e) a[e] = sw[33 * lane + e];
      __syncwarp();
      load_staged(in, roff, row0, base + 32 * kLanes, lane, rs);  // the next tiles, in flight meanwhile
      scan_tile(a, carry, t, seg);
#pragma unroll
      for (int e = 0; e < 32; ++e) sw[33 * lane + e] = a[e];
      __syncwarp();
#pragma unroll
      for (int k = 0; k < 32; ++k) {
        const index_t j = base + 32 * (k % kLanes) + lane;
        if (row0 + k / kLanes < kOuter && j < kN) out[(row0 + k / kLanes) * kN + j] = lv_to(sw[33 * k + lane]);
      }
      __syncwarp();
    }
  } else if constexpr (kAhead > 1) {
    const storage_t* x = in + in_base(live ? row : row0, 0);
    storage_t* y = out + (live ? row : row0) * kN;
    vec_t raw[kAhead][32 / kVec];  // tiles of the next kAhead steps, in flight
#pragma unroll
    for (int h = 0; h < kAhead; ++h) load_tile_clamped(x, (index_t)(h * kLanes + t) * 32, raw[h]);
    for (index_t base0 = 0; base0 < kN; base0 += 32 * kLanes * kAhead)
#pragma unroll
      for (int h = 0; h < kAhead; ++h) {  // raw[h] is a register tile: h is a constant in each unrolled copy
        const index_t base = base0 + (index_t)h * 32 * kLanes;
        if (base >= kN) break;
        lv_t a[32];
#pragma unroll
        for (int i = 0; i < 32 / kVec; ++i) {
          const bool in_row = live && base + (index_t)t * 32 + i * kVec < kN;
#pragma unroll
          for (int e = 0; e < kVec; ++e) a[i * kVec + e] = in_row ? lv_from(raw[h][i].v[e]) : lv_ident();
        }
        load_tile_clamped(x, base + (index_t)(kAhead * kLanes + t) * 32, raw[h]);
        scan_tile(a, carry, t, seg);
        // The lane's own stores, as in the loop below: written out in each loop, since as a function they compile
        // to other code (scan_common.cuh).
#pragma unroll
        for (int i = 0; i < 32 / kVec; ++i) {
          const index_t j = base + (index_t)t * 32 + i * kVec;
          if (!live || j >= kN) continue;
          if constexpr (kVec > 1) {
            vec_t r;
#pragma unroll
            for (int e = 0; e < kVec; ++e) r.v[e] = lv_to(a[i * kVec + e]);
            *reinterpret_cast<vec_t*>(y + j) = r;
          } else {
            y[j] = lv_to(a[i]);
          }
        }
      }
  } else {
    const storage_t* x = in + in_base(live ? row : row0, 0);
    storage_t* y = out + (live ? row : row0) * kN;
    vec_t raw[32 / kVec];
    load_tile(x, (index_t)t * 32, live, raw);
    for (index_t base = 0; base < kN; base += 32 * kLanes) {
      lv_t a[32];
#pragma unroll
      for (int i = 0; i < 32 / kVec; ++i)
#pragma unroll
        for (int e = 0; e < kVec; ++e) a[i * kVec + e] = lv_from(raw[i].v[e]);
      load_tile(x, base + 32 * kLanes + (index_t)t * 32, live, raw);  // the next tiles, in flight meanwhile
      scan_tile(a, carry, t, seg);
      if constexpr (kStagedStores) {
        // Whole-sector stores (Note [Scans]): the lanes' tiles into shared memory, lane k's as per_lane vectors at
        // sv[k * (per_lane + 1) + i] (one vector of padding a lane: the vector writes and the row-order reads then
        // meet at most two to a bank group); then store i of lane L writes vector c = 32 i + L of the warp's step in
        // row-major order (row r = c / (kLanes x per_lane) of the warp), so each store instruction writes
        // kLanes x 32 (or 32 x kVec) contiguous elements instead of a 16-byte piece of 32 tiles.
        constexpr int per_lane = 32 / kVec;
        __shared__ vec_t stage_out[kWarps][32 * (per_lane + 1)];
        vec_t* sv = stage_out[threadIdx.x / 32];
        __syncwarp();  // every lane has read the previous step's vectors
#pragma unroll
        for (int i = 0; i < per_lane; ++i) {
          vec_t r;
#pragma unroll
          for (int e = 0; e < kVec; ++e) r.v[e] = lv_to(a[i * kVec + e]);
          sv[lane * (per_lane + 1) + i] = r;
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < per_lane; ++i) {
          const int c = i * 32 + lane, r = c / (kLanes * per_lane), cc = c % (kLanes * per_lane);
          const index_t rr = row0 + r, j = base + (index_t)cc * kVec;
          if (rr < kOuter && j < kN)
            *reinterpret_cast<vec_t*>(out + rr * kN + j) =
                sv[(r * kLanes + cc / per_lane) * (per_lane + 1) + cc % per_lane];
        }
      } else {
#pragma unroll
        for (int i = 0; i < 32 / kVec; ++i) {
          const index_t j = base + (index_t)t * 32 + i * kVec;
          if (!live || j >= kN) continue;
          if constexpr (kVec > 1) {
            vec_t r;
#pragma unroll
            for (int e = 0; e < kVec; ++e) r.v[e] = lv_to(a[i * kVec + e]);
            *reinterpret_cast<vec_t*>(y + j) = r;
          } else {
            y[j] = lv_to(a[i]);
          }
        }
      }
    }
  }
}
