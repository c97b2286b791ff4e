/// @brief Chain kernels: the generators of pointwise and row chains (Note [Pointwise chains] in optimizer/chains/),
/// library chains (Note [Library chains]: one cuBLASLt-epilogue call), and their tuner, which verifies each variant
/// against the ATen chain and times it against it (Note [Chain tuning]).
///
/// Note [Chain tuning]
/// For a hot chain the tuner plans it (pointwise and row chains), compiles every variant with NVRTC
/// (concurrently), and for each: verifies it on `verify_trials` fresh random inputs at the chain's full sizes and strides (scales 1, 4,
/// 0.01, 30, 1000 in turn, NaN/+-Inf/+-0 injected from the second trial on) with every output poisoned with NaN,
/// against replay_chain (the chain's own ATen ops), each output within its dtype's tolerance times the number of
/// steps that lead to it (plus that many eps of the reference's largest finite value; a reduction counts as two),
/// NaN/Inf matching (a layer norm's mean and rstd only as "not finite": ATen's Welford gives inf or NaN for a
/// row holding an infinity depending on its position, and the normalised output is NaN either way); then once
/// more with only the last output stored (the others null, as when the app dropped them). Verified variants are
/// timed like single kernels (Note [Timing]: interleaved with the ATen chain, L2 flushed before each, device-wide
/// sync before the third event and the escape check), the ATen chain storing every intermediate as eager does
/// and the kernel storing the last output only. The fastest wins when its median speedup reaches `min_speedup`
/// and its 25th percentile is at least 1.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::optimizer {

/// The chain generators' version, part of the GPU fingerprint ("chains:N" in generators_fingerprint()): bumped
/// whenever a chain kernel's code for a given plan and variant changes, so no cache serves an older one.
/// 1: pointwise chains; 2: row chains, 16-byte packs, 16-bit pow by 3 rounding its square; 3: in-place nodes, eval
/// batch norms, one offset per stride pattern. Library chains (Note [Library chains]) add plans, not code: a chain
/// planned as one before them never was cached with a kernel. 4: layer groups of program chains (Note [Skinny
/// layers]): a decode chain once cached as "not beaten" is tuned again. 5: pooled chains (Note [Pooled chains]):
/// BN + ReLU + max-pool, once cached as a fused BN + ReLU prefix, is tuned whole. 6: causal attention (Note [Causal
/// attention]): an attention chain with a square mask is cached with its causal path's code. 7: its exact rows take
/// the chain's own mask (the general path's special values), a new kernel signature.
constexpr int kChainGeneratorVersion = 7;

struct ChainTuneOptions {
  int verify_trials = 5;
  int reps = 30;             ///< timed repetitions per variant (the winner is timed again with twice as many);
                             ///< 0: verification only (the first verified variant is returned, untimed)
  double min_speedup = 1.05;
  int max_variants = 0;      ///< > 0: a sample of this many variants (seeded), e.g. for fuzzing; 0: all
  uint64_t seed = 1;
};

struct ChainTuneReport {
  std::string plan;       ///< the steps, one a line
  std::string variant;    ///< the winner (or the fastest verified variant)
  int variants = 0, verified = 0;
  double aten_us = 0, kernel_us = 0, speedup = 0, speedup_p25 = 0;
  std::string note;       ///< why no kernel, when none
  std::string launch_json;  ///< the winner as load_chain_kernel reads it (variant and plan), when one was timed
  std::string cubin;        ///< the winner's code (none for a library chain)
  std::string kernel_name = "chain_kernel";  ///< its entry point; "library" for a library chain (no code)
};

/// Whether a generator plans `chain` whole: a pointwise or row chain, a library chain or a program chain.
bool chain_plans(const dispatcher::ChainRecord& chain);

/// The number of leading nodes of `chain` the generators can fuse when the whole chain is not fusable: the
/// largest m >= 2 whose prefix plans, or 0 (none, or the whole chain plans). For prefix_chain (chains.h).
size_t fusable_prefix(const dispatcher::ChainRecord& chain);

/// Note [Chain segments] in chains.h: the first node s >= max(from, 1) from which the rest of `chain` (at least 2
/// nodes) plans as a chain of its own, or 0 (none, or the whole chain plans). For suffix_chain (chains.h).
size_t fusable_suffix(const dispatcher::ChainRecord& chain, size_t from);

/// Note [Chain segments] in chains.h: the node ranges [from, to) of `chain` to fuse as chains of their own when it
/// does not plan whole (empty when it does, or when nothing in it plans). At most kMaxChainNodes nodes: a
/// partition from the start, each range the longest run of at least 2 nodes that plans; longer: the longest
/// prefix and the longest suffix after it that plan.
std::vector<std::pair<size_t, size_t>> fusable_segments(const dispatcher::ChainRecord& chain);

/// Tunes `chain` on its device (Note [Chain tuning]): the kernel of the winning variant, or Unsupported (not a
/// chain the generator can fuse, or no GPU), VerifyFailed (no variant verified) or NotFound (none faster by the
/// margin), with `report` filled either way. Runs on the calling thread's current stream; hooks bypassed.
Result<std::unique_ptr<dispatcher::ChainKernel>> tune_chain(const dispatcher::ChainRecord& chain,
                                                            const ChainTuneOptions& options, ChainTuneReport* report);

/// The key a chain's outcome is cached under (Note [Cache layout]): "chain " and its text (signatures and
/// dataflow), one node after another, separated by " | ".
std::string chain_cache_key(const dispatcher::ChainRecord& chain);

/// The chain kernel a tuning run stored as `launch_json` (ChainTuneReport::launch_json) and `cubin`, rebuilt for
/// `chain` on its device: Mismatch when the chain's plan today differs from the one the kernel was built for,
/// Corrupt for a launch description that does not parse, or the loader's error.
Result<std::unique_ptr<dispatcher::ChainKernel>> load_chain_kernel(const dispatcher::ChainRecord& chain,
                                                                   const std::string& launch_json,
                                                                   const std::string& cubin);

/// Each variant's id and CUDA source for `chain` (what NVRTC compiles; a program with layer groups: its layer
/// kernel's variants, Note [Skinny layers]); Unsupported when the generators cannot fuse it, or it is a library chain
/// or a program without layer groups (nothing is compiled; the message says which calls it makes).
Result<std::vector<std::pair<std::string, std::string>>> chain_sources(const dispatcher::ChainRecord& chain);

}  // namespace cudal1::optimizer
