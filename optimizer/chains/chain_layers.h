/// @brief Private: layer groups of program chains (Note [Skinny layers] in chain_program.h): planning one from the
/// chain's records, and running it as the generated kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "chain_program.h"

namespace cudal1::optimizer::chains {

/// Whether a layer group starts at node `k` of `nodes` (Note [Skinny layers]); if so fills `g` (its nodes and
/// LayerArgs) and appends its line to `text`. Never fails: a node that starts no group is false.
bool plan_layer_group(const std::vector<dispatcher::ChainNode>& nodes, size_t k, ProgramPlan::Group* g,
                      std::string* text);

/// The operands of one layer group's launch (x, the residual and y are [M, *] with a unit last stride).
struct LayerOperands {
  at::Tensor x, ln_w, ln_b, w, bias, res, y;
};

/// Launches `v`'s kernel from `module` for one group on the current stream. Unsupported (nothing launched) when
/// an operand does not meet the kernel's layout (the caller then runs the group's ATen ops).
Status launch_layer(const LoadedModule& module, const LayerVariant& v, const LayerArgs& a, const LayerOperands& o);

}  // namespace cudal1::optimizer::chains
