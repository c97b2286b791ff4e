/// @brief The chain suite: chains written as eager ops, LLM- and CNN-shaped (the fusion issue's rows), shared by
/// bench_chains and the GPU chain tests. Rows the generator cannot fuse yet stay in the table as such.
#pragma once

#include <ATen/ATen.h>

#include "cudal1/dispatcher/chains.h"

#include <functional>
#include <string>
#include <vector>

namespace cudal1::bench {

struct ChainRow {
  std::string name;
  std::vector<std::vector<int64_t>> input_sizes;
  at::ScalarType dtype = at::kFloat;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> run;  ///< the chain as eager ops; returns its result
  std::vector<size_t> positive = {};  ///< inputs drawn from [0.5, 1.5) (a running variance), the rest N(0, 1)
  bool gemm = false;  ///< led by a GEMM (compute-bound): the byte floor does not bound it (Note [Library chains])
  int causal_mask = -1;  ///< >= 0: that input is an additive causal mask (0 on and below the diagonal, -inf above)
  std::vector<size_t> weights = {};  ///< inputs that are a model's parameters: the same tensors on every call
};

/// The suite at the sizes (`small`: the same chains at test sizes).
std::vector<ChainRow> chain_suite(bool small);

/// Runs `f` (a chain, through the hook with chains recorded) `times` times on this thread, commits the open chain,
/// and returns the longest chain recorded that was not recorded before; null when none.
dispatcher::ChainRecord* record_chain(const std::function<void()>& f, int times = 3);

/// `c`'s outputs as a region hands them to a kernel when the app keeps only the result: every node's outputs
/// undefined (dropped) but the last node's first, a CPU tensor of NaN of its recorded sizes.
std::vector<std::vector<at::Tensor>> last_output_only(const dispatcher::ChainRecord& c);

/// Fresh random inputs for `row` on CUDA device `device` (drawn with the hook bypassed: not part of any chain).
std::vector<at::Tensor> chain_inputs(const ChainRow& row, int device);

/// `model`'s weights (ChainRow::weights) with fresh random values for every other input: one more call of a model.
std::vector<at::Tensor> next_call_inputs(const ChainRow& row, const std::vector<at::Tensor>& model, int device);

/// Whether `name` holds one of the '|'-separated words of `words` (CHAIN_ROWS in bench_chains).
bool row_selected(const std::string& name, const std::string& words);

}  // namespace cudal1::bench
