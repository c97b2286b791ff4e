/// @brief Private: the chain tuner's verification and timing pieces that program chains share (chain_tuner.cpp,
/// Note [Chain tuning]; chain_program_tune.cpp, Note [Program chains]).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "chain_program.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"

namespace cudal1::optimizer::chain_tuning {

struct ChainTiming {
  double aten_us = 0, kernel_us = 0, speedup = 0, p25 = 0;
};

/// A generator of its own on `device` seeded with `seed` (the app's default generator stays untouched).
at::Generator generator(int device, uint64_t seed);

/// Every node's outputs as the chain recorded them (sizes, strides, dtype) on `device`, NaN-poisoned with
/// `poison`; with `last_only` only the last node's first output (the others undefined, as dropped).
std::vector<std::vector<at::Tensor>> outputs(const dispatcher::ChainRecord& c, int device, bool poison, bool last_only);

/// `k` timed against the ATen chain on externals `ext` (Note [Timing]): interleaved, L2 flushed, escape-checked.
Result<ChainTiming> time(const dispatcher::ChainRecord& c, const std::vector<at::Tensor>& ext,
                         dispatcher::ChainKernel& k, int device, int reps, uint64_t seed);

/// Fills `rep`'s timing; NotFound when `t` does not beat the ATen chain by the margin.
Status judge(const ChainTiming& t, const ChainTuneOptions& o, ChainTuneReport& rep);

/// tune_chain for a program chain (Note [Program chains]): the fused variant (with layer groups, each variant of
/// the layer kernel, the fastest kept: Note [Skinny layers]), else the separate one, verified on the model's own
/// weights and timed against the ATen chain.
Result<std::unique_ptr<dispatcher::ChainKernel>> tune_program(const dispatcher::ChainRecord& chain,
                                                              chains::ProgramPlan plan, const ChainTuneOptions& o,
                                                              ChainTuneReport& rep);

/// The launch description a program's cache record holds ({"program": "fused"|"separate", "plan": text}, and
/// "layers": the layer kernel's variant id where it has one; its cubin is then the record's).
std::string program_launch_json(const chains::ProgramPlan& plan, bool fused, const chains::LayerVariant& layers = {});

}  // namespace cudal1::optimizer::chain_tuning
