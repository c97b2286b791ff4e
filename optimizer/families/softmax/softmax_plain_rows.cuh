// @brief RowPerWarp and RowPerBlock (softmax_family.h): kThreadsPerRow threads (a warp, or the whole block) take
// a row of kCols elements in kVec-element vectors: its maximum (fmaxf: NaN skipped), the sum of exp(x - max), then
// ATen's epilogue. With kCache a thread keeps its kPer vectors in registers between the passes (one read), else
// each pass reads the row again; with kHead a row is a scalar head up to its first kVec-aligned element, aligned
// vectors and a scalar tail (Note [Softmax row heads]).
// Follows softmax_common.cuh and its own constants (namespace softmax, Note [Device constants]):
//   int kThreadsPerRow                   32 (RowPerWarp) or kBlock (RowPerBlock); so is row_max's
//   bool kCache, kHead                   registers between the passes; head/body/tail reading
//   bool kKeepExp                        kCache and softmax: the sum's exp(x - m) kept for the epilogue
//   index_t kRows, kRowStride            rows, elements between row starts
//   int kCols, kVectors                  a row's length and its whole vectors (kCols / kVec)
//   int kPer                             vectors a thread keeps (kCache; else 1)
// (bound to the row's constexpr variables ROWS, RS, D, NV, PER: Note [Softmax row constants] in
// softmax_codegen.cpp).

namespace softmax {

enum : int { kRowsPerBlock = kBlock / kThreadsPerRow };

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  using namespace softmax;
  __shared__ float red[32];
  const int lane = threadIdx.x % kThreadsPerRow;
  const index_t row = (index_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  const bool live = row < kRows;  // dead rows still take part in the reductions
  const index_t bx = (live ? row : 0) * kRowStride, by = (live ? row : 0) * (index_t)kCols;
  // Note [Softmax row heads]: bx and by agree mod kVec (the planner asks (kRowStride - kCols) % kVec == 0, both pointers
  // kVec-aligned), so one head length h serves input and output; lanes < h hold a head element, lanes < tn a
  // tail element (h, tn < kVec <= kThreadsPerRow). Without kHead, h = 0 and the row is kVectors whole vectors.
  int h = 0, nv = 0, tn = 0;
  bool has_h = false, has_t = false;
  float hv = 0.f, tv = 0.f;
  if constexpr (kHead) {
    h = (int)((kVec - bx % kVec) % kVec);
    nv = (kCols - h) / kVec;
    tn = kCols - h - nv * kVec;
    has_h = live && lane < h;
    has_t = live && lane < tn;
    hv = has_h ? to_float(in[bx + lane]) : 0.f;
    tv = has_t ? to_float(in[bx + h + nv * kVec + lane]) : 0.f;
  } else {
    nv = kVectors;
  }
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in + bx + h);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out + by + h);
  float m = neg_inf();
  vec_t c[kPer];  // the thread's vectors (kCache)
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = lane + i * kThreadsPerRow;
      if (live && j < nv) {
        c[i] = x[j];
#pragma unroll
        for (int e = 0; e < kVec; ++e) m = fmaxf(m, to_float(c[i].v[e]));
      }
    }
  } else {
    for (int j = lane; live && j < nv; j += kThreadsPerRow) {
      const vec_t t = x[j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) m = fmaxf(m, to_float(t.v[e]));
    }
  }
  if constexpr (kHead) {
    if (has_h) m = fmaxf(m, hv);
    if (has_t) m = fmaxf(m, tv);
  }
  m = row_max(m, red);
  float s = 0.f;
  float ce[kKeepExp ? kPer : 1][kVec];  // exp(x - m), reused by the epilogue (kKeepExp)
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = lane + i * kThreadsPerRow;
      if (live && j < nv) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float ev = expf(to_float(c[i].v[e]) - m);
          s += ev;
          if constexpr (kKeepExp) ce[i][e] = ev;
        }
      }
    }
  } else {
    for (int j = lane; live && j < nv; j += kThreadsPerRow) {
      const vec_t t = x[j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) s += expf(to_float(t.v[e]) - m);
    }
  }
  if constexpr (kHead) {
    if (has_h) s += expf(hv - m);
    if (has_t) s += expf(tv - m);
  }
  s = row_sum(s, red);
  const float logsum = m + logf(s), rs = 1.f / s;
  if constexpr (kHead) {
    if (has_h) out[by + lane] = to_storage(epilogue(hv, m, logsum, s, rs));
    if (has_t) out[by + h + nv * kVec + lane] = to_storage(epilogue(tv, m, logsum, s, rs));
  }
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = lane + i * kThreadsPerRow;
      if (live && j < nv) {
        vec_t o;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          if constexpr (kKeepExp)
            o.v[e] = to_storage(div_rn(ce[i][e], s, rs));
          else
            o.v[e] = to_storage(epilogue(to_float(c[i].v[e]), m, logsum, s, rs));
        }
        y[j] = o;
      }
    }
  } else {
    for (int j = lane; live && j < nv; j += kThreadsPerRow) {
      const vec_t t = x[j];
      vec_t o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = to_storage(epilogue(to_float(t.v[e]), m, logsum, s, rs));
      y[j] = o;
    }
  }
}
