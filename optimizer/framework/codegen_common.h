/// @brief Private: source fragments every generator shares (their device code in this folder's .cuh files).
#pragma once

#include <c10/core/ScalarType.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

/// Note [Shared device snippets]
/// The device code that several families' sources share lives in .cuh files of this folder, embedded at build time
/// (cudal1_embed_cuda(), framework_cuda.h) and returned or written by the functions below, which are what
/// generators put in their sources: `cudal1 source` prints them, as NVRTC compiles them. Those the sources of
/// unary, binary, scan, gemm, batch norm, pool and the chains carry (dtype_f32/f16/bf16.cuh, mixed_dtypes.cuh,
/// exact_divide.cuh) are kept to the very text of the string literals they replaced, comment-free, so that those
/// families' sources, their generator versions and the records cached under them stay as they were; their
/// contracts are here. The others start with their own @brief. Row reductions read typed constants that
/// row_reduce_source writes before them (Note [Device constants]), not macros.

/// `storage_t`, `to_float(storage_t)` and `to_storage(float)` for fp32, fp16 or bf16, without CUDA headers (NVRTC
/// ships none): PTX cvt instructions, round-to-nearest-even like ATen's conversions (dtype_f32.cuh, dtype_f16.cuh,
/// dtype_bf16.cuh). "" for other dtypes.
std::string_view dtype_prelude(c10::ScalarType t);

/// Conversions for kernels whose operands have different dtypes (mixed_dtypes.cuh): `float cvt_<tag>(<storage>)`
/// for the tags f32, f16, bf16, f64, i64, i32 and b8 (the dispatcher's dtype_short_name, which names them) and
/// `<storage> st_<tag>(float)` (round to nearest even) for f32/f16/bf16. No CUDA headers.
std::string_view mixed_dtype_prelude();

/// The storage type of a tag's dtype in generated code ("float", "unsigned short", ...), "" if unknown.
const char* mixed_storage_type(c10::ScalarType t);

/// Writes the typed constants row_reduce.cuh reads, at namespace scope (Note [Device constants]), then that file:
/// `neg_inf()`, `row_barrier()`, `warp_sum`, `warp_max`, `row_sum(v, red)` and `row_max(v, red)`: fp32
/// reductions over the `threads_per_row` threads of a row (32: a warp; else `block`, the reducing threads of the
/// block, through `float red[32]` in shared memory), the result identical in every thread of the row. The
/// reducing threads meet at __syncthreads(), or with `named_barrier` at named barrier 1 over `block` threads
/// (a kernel whose other threads do not take part).
void row_reduce_source(std::ostream& o, int threads_per_row, int block, bool named_barrier = false);

/// `struct Welford {n, mean, m2}` (fp32) and `wf_combine(a, b)`: Chan's merge of two partial statistics, as
/// ATen's WelfordOps::combine (an empty side returns the other unchanged). welford.cuh.
std::string_view welford_source();

/// Thread-block cluster primitives (Note [Clusters], sm_90+) as inline PTX (cluster_primitives.cuh):
/// `cluster_rank()`, `cluster_arrive()` and `cluster_wait()` (the two halves of the cluster barrier: a thread's
/// earlier writes are visible to every thread of the cluster after its wait), `cluster_arrive_relaxed()` (an
/// arrival that orders no memory operation), `cluster_sync()` (both), and `load_remote(p, rank)`: the float at the
/// shared-memory address `p` in the block of cluster rank `rank` (distributed shared memory).
std::string_view cluster_primitives_source();

/// Note [Async copies]: cp.async copies from global into shared memory (sm_80+), the one place their inline PTX
/// lives (the softmax shared tiles and cluster rows, the reductions' column tiles): async_copy.cuh, needing
/// nothing before it.
/// `cp_async<BYTES>(sa, g)`: starts copying BYTES = 16, 8 or 4 bytes from the global address `g` (a generic
/// pointer to global memory, or a cvta.to.global address) to the 32-bit shared-memory byte address `sa`
/// (__cvta_generic_to_shared's value or an offset from it; both aligned to BYTES): cp.async.cg (cached in L2
/// only) for 16 bytes, cp.async.ca for 8 and 4 (.cg takes 16 only; nothing copies 2 bytes); `cp_async_commit()`
/// (cp.async.commit_group: this thread's copies since the last commit become one group), `cp_async_wait<N>()`
/// (cp.async.wait_group N: at most N of its groups still pending) and `cp_async_wait_all()` (cp.async.wait_all:
/// every copy, committed or not). Each is one volatile asm with a "memory" clobber, so the compiler moves no
/// load or store across a copy's start or a wait. A copy's bytes are visible to the thread that started it after
/// its wait, and to the other threads of the block only after a barrier too.
/// No L2 prefetch-size hint (.L2::128B) on the copies: it slows column log_softmax bf16 [32,32000,64] dim 1 by
/// ~2.5% (its 64-byte tile rows; the other half line belongs to another cluster) and moves softmax f32
/// [4096,65536], log_softmax bf16 [8192,32000], f16 attention over queries, spatial softmax and argmax columns
/// by under 0.4%.
std::string_view async_copy_source();

/// The vector form of Note [Async copies] (vector_copy.cuh), after async_copy_source and the source's `vec_t`
/// (2, 4, 8 or 16 bytes, at namespace scope): `copy_in(s, g)` (*g to *s: cp_async<sizeof(vec_t)> of the global
/// address, or a plain load and store for 2-byte vectors), `copy_commit()` and `copy_wait<N>()` (nothing for
/// 2-byte vectors).
std::string_view vector_copy_source();

/// `div_rn(a, b, rb)` with rb = 1 / b (exact_divide.cuh): a / b correctly rounded whenever the quotient is a normal
/// number (Markstein's correction: q = a * rb, then q + fma(-q, b, a) * rb; NaN and Inf propagate as in a / b).
/// Three instructions against div.rn's reciprocal, Newton steps and slow-path test, for a divisor shared by many
/// quotients. A subnormal quotient may differ from div.rn by one subnormal ulp (< 1.5e-45); callers whose
/// numerators can be tiny or huge guard it (the pooling family's div_rn_n, Note [Pooling exact division]).
std::string_view exact_divide_source();

/// Note [Device constants]
/// A generated head gives the device code its compile-time values as enumerators of a fixed underlying type,
/// `enum : index_t { kNumel = 8192 };`, not as constexpr variables: NVRTC emits every namespace-scope variable,
/// constexpr or not, used or not, as a global of the module (.nv.global data and a symbol in the cubin), and
/// warns of an unused one. An enumerator has its type and no storage; in an expression it promotes to its
/// underlying type (int, bool, unsigned, index_t), as the literal it stands for would, so the device code reads
/// as typed constants (if constexpr, __launch_bounds__, array bounds) and compiles to the same cubin.

/// Writes one constant of a generated head (Note [Device constants]): `enum : <type> { <name> = <value> };` and a
/// newline, a bool as true / false.
template <class T>
void constant(std::ostream& o, const char* type, const char* name, const T& value) {
  o << "enum : " << type << " { " << name << " = " << std::boolalpha << value << std::noboolalpha << " };\n";
}

/// The bit pattern of `f` as an unsigned literal for generated code, e.g. `0x3727c5acu` (1e-5f): a float constant
/// that reaches the device exactly, with no decimal round trip.
std::string float_bits_hex(float f);

/// A policy feature vector: every knob indicator crossed with every problem-class indicator (ctx x knobs,
/// context-major), so that the policy can learn a knob's worth per class of problem.
std::vector<float> crossed_features(const std::vector<float>& ctx, const std::vector<float>& knobs);

/// Knob values of an elementwise technique space {vec, block, unroll, grid}.
struct ElementwiseKnobs {
  std::vector<int> vecs, blocks, unrolls;
};

/// Every {vec, block, unroll, grid in {0, 1}} variant with vec <= max_vec, vec-major (the elementwise spaces).
std::vector<Variant> elementwise_space(const ElementwiseKnobs& k, int max_vec);

/// One-hot indicators of `v`'s knobs over `k` (then grid 0, grid 1): the knob part of elementwise features.
std::vector<float> elementwise_knob_features(const ElementwiseKnobs& k, const Variant& v);

/// Bytes per element of the dtypes the generators handle (fp32: 4, fp16/bf16: 2).
inline int elem_size(c10::ScalarType t) { return t == c10::ScalarType::Float ? 4 : 2; }

/// True for the dtypes the generators handle.
inline bool generated_dtype(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}

}  // namespace cudal1::optimizer
