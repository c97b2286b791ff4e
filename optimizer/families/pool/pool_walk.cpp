/// @brief ChannelsLastWalk: channels-last avg_pool2d walking down the image (knob walk, Note [Pooling channels-last
/// walk]): a thread takes OPW channels of CPX adjacent output columns and walks WALK output rows, loading each input
/// row of its columns once; its device code is pool_channels_last_walk.cuh.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

/// Note [Pooling channels-last walk]
/// Knob walk (2, 3, 4; 0 off), with opw (16- or 8-byte channel vectors) and cpx (1, 2, 4 adjacent output
/// columns). Scope: channels-last avg, stride 1 both ways, KH > 1, OPW channels a vector the layout allows,
/// OPW x CPX >= 8 outputs a row, and KH x CPX x OPW accumulators + two rows of RC = CPX + KW - 1 pixel words
/// <= kMaxWalkRegisters (80) floats; walks of walk x KH output rows (a longer walk only where the shorter one
/// does not already cover the image), blocks of 128 or 256 threads, launch bounds capping registers at 128.
/// Why: the opw8 kernel (~1.9x the floor on avg_pool2d bf16 channels-last [64,512,28,28] k3 s1 p1,
/// count_include_pad=False) is issue-bound (Nsight Compute: SM 86%, DRAM 35%): per 8 outputs it loads
/// and unpacks all 9 window pixels (72 unpacks, 9 vector loads with their 64-bit address arithmetic), 72 FADDs,
/// the division, and 14% of its pixels (the image border) take the per-window divisor and the IEEE division;
/// ~36-38 instructions an output, and its L1 reads ~4.5x the input from L2 (vertical neighbours sit in other
/// blocks). The cpx runs (~27) still load every input row three times.
/// How: thread t takes channels c0 = (t % CG) x OPW of output columns ow0 .. ow0 + CPX - 1 and walks output rows
/// oh0 .. oh0 + WALK - 1 (fewer in the image's last walk): input rows hs0 = oh0 - PH onwards, each loaded once
/// (RC vectors, one row ahead; plain loads where the row and all RC columns lie in the image, else per-pixel
/// predicated with +0, which adds nothing: Note [Pooling exact division], "zero fill") and unpacked once into
/// fp32. Accumulators acc[o % KH][p][e] for the KH output rows whose windows hold the row: input row i adds
/// its pixel j to output row i - r (window row r) and column p (window column j - p); the cell (0, 0) of a
/// window sets its slot to +0 + v (ATen's sum starts at +0), the others add, so each output's additions come
/// in ATen's order (rows in order as the walk arrives at them, columns left to right within one). After its
/// last row an output row is divided and stored (vector stores of OPW channels). The first KH - 1 rows are
/// peeled (they start outputs only); then the rows go in steps of KH, unrolled KH times so that every slot is a
/// compile-time register (the code of KH rows, not of the whole walk; a step finishes KH output rows, and
/// only the walk's last step may run past its rows). 32-bit thread decomposition (THREADS < 2^31), one 64-bit
/// base pointer a thread for loads and one for stores, whole rows and compile-time pixel offsets from them.
/// Divisor: CONST_DIV where the signature has one; else INNER_DIV where the window lies in the image, else
/// ATen's per-window divisor d with y = __frcp_rn(d) (RN(1/d), so div_rn stays exact; an empty window, which
/// the arguments ATen accepts never give, sums +0 cells and divides by 1: ATen's 0).
/// Then div_rn_n (Note [Pooling exact division]) for every dtype.
/// Not used: bf16 division by q0 = RN(s x y) alone: q0 lies within one fp32 ulp of RN(s / d) for every
/// s, so both round to the same bf16 unless q0's low 16 bits are 0x7fff, 0x8000 or 0x8001 (checked on the CPU:
/// 2.47e9 pairs, 0 differences). But sums of 4-9 bf16 values have few significant bits, and q0's low half is
/// exactly 0x8000 for 1.8% (d = 9) to 15% (d = 4) of random outputs (exact quotients sitting on a bf16 tie), so
/// the exact path would run in nearly every warp; telling exact ties apart needs the remainder FFMA, which
/// leaves it no cheaper than div_rn_n.
/// Instructions (sm_90 cubin .text, nvcc 13.0 -O3, the rare division paths stubbed; counted as size differences
/// of variants without the step loop): bf16 opw8 cpx2, a step (3 rows + 3 output rows = 48 outputs) ~1090
/// executed (432 FADD, 96 unpacks, 288 for 48 divisions: FMUL, 2 FFMA, 3 range compares, 24 packs, 12 loads,
/// 6 stores, ~230 control, moves and addresses), prologue and peel ~280: ~24.6 an output for a whole walk of 9
/// rows (10 FADD: 9 is ATen's order, the last step's rows also feed outputs past the walk); for the bench's 28
/// rows (walks 6,6,6,6,4 / 9,9,9,1 / 12,12,4) ~27.4 / ~26.8 / ~26.1, against ~38 for opw8 (~36 in the image,
/// the border pixels' per-window divisor and IEEE division above that). opw4 cpx4 about the same (102
/// registers), opw8 cpx1 ~27 a step-output; opw8 cpx2 118 registers, no spills (cap 128: 16 warps an SM with
/// 256-thread blocks, 2 KB a warp-row in flight, ~32 KB an SM against the ~22 KB that 4.2 TB/s x the DRAM
/// latency needs).
/// Checked on the CPU: every walk variant's generated source compiled as host C++ (intrinsics and PTX stores
/// emulated, threads run one by one) against ATen's loop, bf16/fp16/fp32, count_include_pad both ways, a
/// divisor, padding 2, KH 5, a 1x1 image and the bench's [2,512,28,28]: bit-identical, also with +-Inf, NaN
/// and subnormal inputs.
/// Bytes: DRAM reads the input once (neighbouring walks' rows, (KH - 1) / WALK = 22% at WALK 9, come from L2);
/// L1 reads from L2 (CPX + KW - 1) / CPX x (WALK + KH - 1) / WALK of the input per thread, less where the
/// block's adjacent runs share their halo columns in L1: opw8 cpx2 2.4x (1.5x with that), opw4 cpx4 1.8x,
/// against ~4.5x for opw8 and ~3.4x for the cpx runs.
/// Speed: the best walk (opw8, walk 3, block 128 on the row above) runs ~1.3x a copy of the same bytes, bit-identical,
/// and stays near issue-bound: 9 FADD and ~6 for the exact division an output are 60% of its instructions, which
/// only giving up ATen's order removes (Note [Pooling separable sums]).

int ChannelsLastWalk::registers(const PoolShape& s) const {
  const int rc = cpx + s.kw - 1;
  const int wpv = opw * elem_size(s.dtype) / 4;
  return s.kh * cpx * opw + 2 * rc * wpv;  // the accumulators, the current and the next row's words
}

int64_t ChannelsLastWalk::threads(const PoolShape& s) const {
  return s.n * ((s.oh + rows(s) - 1) / rows(s)) * ((s.ow + cpx - 1) / cpx) * (s.c / opw);
}

void ChannelsLastWalk::source(std::ostream& o, const PoolShape& s) const {
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kCpx", cpx);
  constant(o, "int", "kWalkRows", rows(s));
  constant(o, "int", "kGroups", s.c / opw);
  constant(o, "int", "kRunCols", cpx + s.kw - 1);
  constant(o, "int", "kWalks", (s.oh + rows(s) - 1) / rows(s));
  constant(o, "int", "kRuns", (s.ow + cpx - 1) / cpx);
  constant(o, "int", "kWords", opw * 8 * elem_size(s.dtype) / 32);
  constant(o, "int", "kMinBlocks", std::max(1, 65536 / (block * 128)));
  constant(o, "bool", "kSeparable", separable);
  o << "}  // namespace pool\n" << device_sources::kPoolChannelsLastWalk;
}

}  // namespace cudal1::optimizer::pool
