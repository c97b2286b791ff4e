/// @brief The GPU fuzz test's random signatures, one drawer per family (ranks 1-5; sizes including 0, 1, odd and
/// prime; permuted, sliced and stepped strides; every dtype; every dim), and the variants each family's fuzz
/// favours (the techniques that small random shapes would otherwise reach too rarely).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::fuzz {

using optimizer::Problem;
using Rng = std::mt19937_64;

/// Elements a drawn tensor stays under (long norm rows may pass it, up to ~4.9 M).
constexpr int64_t kMaxNumel = int64_t{1} << 21;

/// A random layout of `sizes` (`kinds` 1: contiguous only; up to 4: permuted, sliced with an offset, stepped):
/// its strides and storage offset.
void draw_layout(Rng& rng, const std::vector<int64_t>& sizes, int kinds, std::vector<int64_t>* strides,
                 int64_t* offset);

/// One random signature of a family, planned for compute capability `sm` (strides left empty where the caller
/// draws the layout: unary, softmax, scan).
Problem unary(Rng& rng, int sm);
Problem softmax(Rng& rng, int sm);
Problem norm(Rng& rng, int sm);
Problem batch_norm(Rng& rng, int sm);
Problem pool(Rng& rng, int sm);
Problem scan(Rng& rng, int sm);
Problem reduction(Rng& rng, int sm);
Problem binary(Rng& rng, int sm);
Problem gemm(Rng& rng, int sm);

/// The variants a family's fuzz draws two times in three where the space has any.
bool softmax_cluster_variant(const optimizer::Variant& v);
bool norm_chip_variant(const optimizer::Variant& v);
bool pool_slide_variant(const optimizer::Variant& v);
bool reduce_pipelined_tile(const optimizer::Variant& v);
bool scan_native_variant(const optimizer::Variant& v);
/// Gemm variants the fuzz favours: residue rows (Note [Residue rows]), 2 of 26 variants where offered.
bool gemm_residue_variant(const optimizer::Variant& v);

}  // namespace cudal1::fuzz
