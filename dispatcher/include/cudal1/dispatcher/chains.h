/// @brief Chain profiling: the recurring chains of connected op calls the hook sees on each thread, with their
/// dataflow, counted and ranked by device time like signatures (Note [Chain profiling]).
///
/// Note [Chain profiling]
/// With CUDAL1_FUSE=on the hook also hooks the chain ops (chain_ops(): pointwise ops eager code writes chains
/// with, beyond the families' own; not casts, whose `_to_copy` has a BackendSelect kernel of its own) and, after every top-level hooked call on a profiled device, hands the call to this
/// thread's ChainBuilder. The builder keeps the *open chain*: the calls since the last break, each with where
/// its tensor arguments came from, either an earlier call of the open chain (producer node, output index) or an
/// external tensor (numbered by first use inside the chain, so `x * x` reads one external twice). A call joins
/// the open chain when one of its tensor arguments is an open-chain output, or an external tensor the previous
/// call read too (HF's gelu_new reads its input in `0.5 * x` and again in `pow(x, 3)`; a mask read by every
/// layer does not join layers, since the call before it did not read it). Any other call breaks the chain: the
/// open chain, if it has at least 2 calls,
/// is *committed* (found or inserted in the ChainTable by its key, counted), and the call starts a new one. So
/// an op the hook does not see (a matmul, a convolution) splits chains, since its output is no chain output.
/// A chain is capped at kMaxChainNodes calls; a longer run commits and restarts there.
///
/// The key is the nodes' signature hashes and devices plus every input's source, so two chains are the same
/// when they run the same signatures wired the same way. Outputs are held as weak references to their
/// TensorImpl (never their storage): a dead output's address cannot be reused by a new tensor while the open
/// chain refers to it, so pointer equality is identity. For each external slot the ChainRecord counts how often
/// it was the very tensor of the previous commit at the same version (a weight), which deferral needs later.
/// A chain's device time is its count times the sum of its nodes' sampled mean times; it turns hot when it has
/// been committed CUDAL1_HOT_CALLS times and holds at least CUDAL1_CHAIN_SHARE of all profiled device time.
/// The builder only observes: what runs, and every result, is exactly what the hook would do without it. A call
/// deferred into a fused chain's region (Note [Deferred regions]) is not observed unless program chains are
/// recorded: it is a known chain's node, and recording it again would cost every deferred call host time (the
/// builder sees a gap, which breaks its open chain, as an unhooked op would). A CNN's program chain (Note [Program
/// chains]) must stay whole around the ordinary chains fused inside it, so once a convolution was seen every
/// deferred call is observed as before.
///
/// Note [Chain segments]
/// A recorded chain need not plan whole: hooked library ops (mm, addmm) join chains, since their outputs feed
/// elementwise ops, and a pooling window ends what a pointwise kernel can do. The runtime then fuses *segments*.
/// A chain of at most kMaxChainNodes is partitioned from its start: at each node the longest run of at least 2
/// nodes that plans is a segment (segment_chain) and the next starts after it; where none plans the node runs
/// alone (fusable_segments in optimizer/chain_tuner.h: GPT-2's layer, linked through its reshapes by Note [Row
/// views], is `mm, add | add, layer_norm | mm, add, gelu composite | mm, add | ...`). A longer chain (a program)
/// keeps two: the longest prefix that plans (prefix_chain; ResNet's stem: batch norm and ReLU, then a max-pool)
/// and, after it (or after the first node), the longest suffix that plans (suffix_chain). Each segment is a chain
/// record of its own with its own first signature, so its region opens at
/// its own first call and runs when the next segment's first call arrives; a value one segment hands to the next
/// is an external of the latter, written by then. The whole chain's own record stays one by one.
///
/// Note [Matmul views]
/// Eager attention is `softmax(q @ k^T * scale [+ mask]) @ v`, and `at::matmul` on 4-D tensors reshapes its
/// operands into bmm's 3-D form ([B*H, L, D]) and returns `_unsafe_view` of bmm's result: the scale reads a
/// view of the bmm's output, the second bmm a view of the softmax's. So that such a chain is seen whole (and can
/// be rewritten into fused attention: Note [Attention rewrite] in optimizer/chains/chain_library.h), the builder
/// links an argument that is not an open output itself to the open output whose storage it shares when a bmm is
/// at either end (the producer is a bmm, or the call is one), and the argument is a pure reshape of it: both
/// contiguous, the same storage offset and number of elements. The node's input is then marked `view`. A
/// bmm's result dies inside matmul, so the builder keeps a weak reference to each bmm output's storage (its
/// address stays unique while held); for a bmm reading a view, the producer's TensorImpl must still be alive
/// (its storage is then alive too). The other generators plan only chains without views (has_view_input); an
/// unlinked view is an external as before.
///
/// Note [Row views]
/// Models reshape between a linear layer and what follows: HF's Conv1D computes `addmm(bias, x.view(-1, K), w)`
/// and returns `.view(B, T, N)`, so the activation after a GPT-2 c_fc reads a view of the bias add's [B*T, N]
/// result, and the next GEMM reads `ln(x).view(-1, K)`. An ordinary chain (not a program) therefore also links an
/// argument to the open output it is a reshape of when the reshape keeps the last dim (rows of the same length:
/// [B*T, N] <-> [B, T, N]), both contiguous, with the same storage offset and number of elements; the node's
/// input is marked `view`. As for a bmm, the builder keeps a weak reference to each open output's storage: in
/// InferenceMode a view keeps no reference to its base, and TorchScript drops the base once the view is made, so
/// the output's own TensorImpl is gone when the view is read. An argument whose storage is none of the open
/// outputs' (a weight, an activation from outside) costs one scan of a few pointers. Such a chain plans in
/// segments (Note [Chain segments]), a view between two of them being an external of the later one, or whole as a
/// library chain whose activation reads the GEMM's result through the view (Note [Library chains]).
///
/// Note [In-place nodes]
/// Models write activations and residuals in place (torchvision's `ReLU(inplace=True)`, `out += identity`), so
/// the hook also sees the in-place forms of the chain ops (`relu_`, `add_.Tensor`, ...; is_inplace() in hook.h)
/// when chains are on. Such a call is a node whose one output *is* its first argument: the same TensorImpl now
/// holds a new value. The builder therefore resolves a tensor argument to the *newest* node that output it, so a
/// read after `relu_(t)` comes from the relu node, a read before it from t's producer. The planner computes the
/// in-place node like its functional form and stores only the newest value of a storage (the kernel writes t
/// once); deferral returns the argument itself as the pending output; an early flush runs the in-place op on
/// the tensors the prefix already wrote. An in-place op on an external tensor (not a chain value) is recorded
/// but not planned.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/function_schema.h>
#include <c10/util/SmallVector.h>

#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::dispatcher {

constexpr int kMaxChainNodes = 32;
/// Note [Program chains]: the longest program chain (a whole CNN forward between its input and its first view).
constexpr int kMaxProgramNodes = 320;

/// Where one tensor argument of a chain node comes from.
struct ChainInput {
  int producer = -1;  ///< index of the earlier node whose output it is; -1: an external tensor
  int index = 0;      ///< the producer's output index, or the external slot; -1 with producer -1: None
  /// With producer >= 0: the argument is a reshape of that output (the same storage, offset and elements, both
  /// contiguous), not the output itself (Note [Matmul views]). Its sizes and strides are the argument's, as
  /// the node's signature recorded them.
  bool view = false;
  bool operator==(const ChainInput& o) const { return producer == o.producer && index == o.index && view == o.view; }
};


/// True for the schema arguments a ChainNode lists in `inputs` (Tensor and Tensor?), in schema order.
bool is_tensor_argument(const c10::Argument& a);

/// One call of a chain: its signature, its tensor arguments' sources in argument order, and its tensor outputs'
/// metadata as first seen (a signature fixes them: deferral allocates outputs from these).
struct ChainNode {
  SigRecord* rec = nullptr;
  bool inplace = false;  ///< Note [In-place nodes]: its one output is its first argument
  std::vector<ChainInput> inputs;
  std::vector<TensorSpec> outputs;
};

/// True when a node of `nodes` reads a reshape of an earlier node's output (Note [Matmul views]): only the
/// attention rewrite plans such a chain; the pointwise, row and program generators decline it.
bool has_view_input(const std::vector<ChainNode>& nodes);

/// True when `s` is laid out contiguously (strides of size-1 dims ignored); its storage offset is not looked at.
bool contiguous_spec(const TensorSpec& s);
/// The number of elements of `sizes` (1 for none).
int64_t numel_of(const std::vector<int64_t>& sizes);

class ChainKernel;  // regions.h

/// Lifecycle of a chain. kFused and later are set by the region code (Note [Deferred regions]).
enum class ChainState : uint8_t {
  kCold,      ///< counted, not hot yet
  kHot,       ///< committed CUDAL1_HOT_CALLS times and over CUDAL1_CHAIN_SHARE of the device time
  kAten,      ///< hot, tried: no chain kernel (not one the generators can fuse, or none faster); calls run one by one
  kFused,     ///< a chain kernel computes it: its calls are deferred and run as one (regions.h)
  kDiverged,  ///< was fused, but its deferred regions diverged too often: its calls run one by one again
};
const char* chain_state_name(ChainState s) noexcept;

/// What tuning a chain found (reports).
struct ChainOutcome {
  std::string kernel;  ///< the chain kernel's description, or the fastest tried
  std::string plan;    ///< the generator's plan, one step a line
  double aten_us = 0, kernel_us = 0, speedup = 0;
  std::string note;    ///< why the calls still run one by one, when they do
};

/// Everything known about one recurring chain. Nodes and key are fixed at creation; counters are atomic.
class ChainRecord {
 public:
  ChainRecord(uint64_t hash, std::vector<int64_t> key, std::vector<ChainNode> nodes, int externals);

  const uint64_t hash;
  const std::vector<int64_t> key;
  const std::vector<ChainNode> nodes;
  const int externals;  ///< distinct external tensors
  std::atomic<uint64_t> count{0};
  std::atomic<ChainState> state{ChainState::kCold};
  std::atomic<ChainKernel*> kernel{nullptr};  ///< set with kFused; owned by the region code, kept until exit
  /// Deferred regions of this chain: opened, run whole by its kernel, flushed early (a prefix, through ATen).
  std::atomic<uint64_t> regions{0}, completed{0}, flushed_early{0};
  std::atomic<uint64_t> recent_early{0};  ///< the last 64 regions, newest in bit 0: 1 = flushed early

  /// Device time of the nodes' sampled calls per chain run, in microseconds (0 while none was sampled).
  double mean_us() const;
  /// count() x mean_us().
  double est_total_us() const;
  /// Per external slot: commits in which it was the same tensor, at the same version, as in the previous one.
  std::vector<uint64_t> same_external() const;
  /// Per external slot: the tensor of the last commit if it is still alive (a module's weight), else undefined.
  std::vector<at::Tensor> last_externals() const;
  /// Readable form, one node a line: "%2 = aten::mul(f32[8,4096]{4096,1}, ...) <- %0.0, ext1".
  std::string text() const;

  ChainOutcome outcome() const;
  void set_outcome(ChainOutcome o);

  /// Counts one commit whose external tensors were `ext` (weak references; versions alongside).
  void note_commit(const std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>>& ext,
                   const std::vector<uint32_t>& versions);

 private:
  mutable std::mutex mu_;
  std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> last_ext_;
  std::vector<uint32_t> last_versions_;
  std::vector<uint64_t> same_;
  ChainOutcome outcome_;
};

/// The chains of one process, found by key. Records are never removed (pointers stay valid).
class ChainTable {
 public:
  /// The record of `key` (hash `hash`), inserted from `nodes` and `externals` if new; and whether it was new.
  std::pair<ChainRecord*, bool> find_or_insert(uint64_t hash, const std::vector<int64_t>& key,
                                               const std::vector<ChainNode>& nodes, int externals);
  /// The record of the chain made of `nodes` reading `externals` external slots (key computed here).
  ChainRecord* find_or_insert(const std::vector<ChainNode>& nodes, int externals);
  void for_each(const std::function<void(ChainRecord&)>& fn) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ChainRecord>> records_;
};

/// One thread's open chain (Note [Chain profiling]). Not thread-safe: each thread has its own.
class ChainBuilder {
 public:
  /// The tensors of one observed call: its tensor arguments in order (null or undefined for a None optional)
  /// and its tensor outputs. The pointers are the caller's, valid for the duration of observe().
  struct Call {
    SigRecord* rec = nullptr;
    bool inplace = false;  ///< an in-place op: outputs[0] is args[0] (Note [In-place nodes])
    bool conv = false;     ///< a convolution: only program chains hold it (Note [Program chains])
    bool bmm = false;      ///< a batched matmul: its operands and result may be linked through views (Note [Matmul views])
    c10::SmallVector<const at::Tensor*, 6> args;
    c10::SmallVector<const at::Tensor*, 4> outputs;
  };
  /// A builder of ordinary chains (at most kMaxChainNodes calls, convolutions unseen), or with `programs` of
  /// program chains (at most kMaxProgramNodes calls, convolutions included, only chains holding one committed).
  explicit ChainBuilder(bool programs = false) : programs_(programs) {}
  /// Observes one call; commits the open chain into `table` when this call breaks it. Returns the record
  /// committed by this call, if any.
  ChainRecord* observe(const Call& call, ChainTable& table);
  /// Commits the open chain (if it has 2 or more nodes) and empties it; returns the record, if any.
  ChainRecord* close(ChainTable& table);
  size_t open_nodes() const { return n_; }

 private:
  struct Open {
    ChainNode node;  // node.outputs' specs are filled when the chain is new to the table (cold path)
    std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> outputs;
    // A bmm's outputs' storages, and every output's in an ordinary chain (Note [Matmul views], Note [Row views]):
    // matmul returns a view of the bmm's result, whose own TensorImpl is gone by the next call; the weak
    // reference keeps the StorageImpl's address unique.
    std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages;
    bool bmm = false;
  };
  /// The open output `t` is a reshape of, where a bmm is at either end (Note [Matmul views]) or, in an ordinary
  /// chain, a reshape of its leading dims (Note [Row views]); producer -1 if none.
  ChainInput view_source(const at::Tensor& t, bool consumer_bmm) const;
  /// True when `t`'s storage is one an open output of this chain was stored in (the weak references of
  /// Open::storages keep those addresses unique): a cheap pre-check before view_source.
  bool open_storage(const at::Tensor& t) const;
  // The open chain is nodes_[0, n_): slots past n_ keep their vectors' capacity, so a steady stream of calls
  // allocates nothing; closing releases every weak reference.
  std::vector<Open> nodes_;
  size_t n_ = 0;
  bool programs_ = false;
  bool has_conv_ = false;  // the open chain holds a convolution
  size_t open_bmm_ = 0;    // bmm nodes in the open chain
  std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> externals_;
  std::vector<uint32_t> ext_versions_;
  // Indexes of the open chain by TensorImpl (an address is not reused while the weak references above hold it):
  // the newest node output, and the external slot, of each tensor; a program's hundreds of calls and weights
  // would otherwise be scanned for every argument.
  std::unordered_map<const c10::TensorImpl*, ChainInput> produced_;
  std::unordered_map<const c10::TensorImpl*, int> ext_slots_;
  std::vector<int64_t> key_;                // reused key buffer
  std::array<ChainRecord*, 8> recent_{};    // this thread's last committed records: no table lock on a repeat
  size_t next_recent_ = 0;
};

/// The ops the hook adds with CUDAL1_FUSE=on so that chains are seen whole ("pow.Tensor_Scalar", "rsqrt", ...),
/// beyond the families' own.
const std::vector<std::string>& chain_ops();

/// Visits every chain the hook recorded (empty unless the hook was installed with chains on).
void for_each_chain(const std::function<void(ChainRecord&)>& fn);

/// The external slots `nodes` read: slots are numbered by first use, so this is 1 + the largest read (0 for none).
int externals_read(const std::vector<ChainNode>& nodes);

/// The hook's record of the chain made of the first `nodes` (>= 2) nodes of `chain` (inserted if new; it is
/// never committed by the builder, so its count stays 0): what fuses when only a prefix of a recurring chain is
/// fusable (ResNet's stem: batch norm and ReLU, then a max-pool). Null without chains or for a bad length.
ChainRecord* prefix_chain(const ChainRecord& chain, size_t nodes);

/// The nodes `from`.. of `chain` as a chain of their own (Note [Chain segments]): inputs produced by an earlier node
/// become external slots, and every external slot is renumbered by first use; `externals` gets their count.
std::vector<ChainNode> suffix_nodes(const ChainRecord& chain, size_t from, int* externals);

/// Nodes [from, to) of `chain` as a chain of their own, renumbered as suffix_nodes does (Note [Chain segments]).
std::vector<ChainNode> segment_nodes(const ChainRecord& chain, size_t from, size_t to, int* externals);

/// The hook's record of the chain made of nodes [from, to) of `chain` (at least 2; inserted if new, never
/// committed by the builder). Null without chains or for a bad range.
ChainRecord* segment_chain(const ChainRecord& chain, size_t from, size_t to);

/// The hook's record of the chain made of nodes `from`.. of `chain` (at least 2; inserted if new, never committed
/// by the builder): what fuses after a GEMM or a fused prefix the generators cannot extend. Null without chains or
/// for a bad `from`.
ChainRecord* suffix_chain(const ChainRecord& chain, size_t from);

/// Commits this thread's open chain now (e.g. at the end of a loop, before a report); a no-op without chains.
void close_chain_on_this_thread() noexcept;

/// Turns recording on or off at run time for hooks installed with chains (the host-cost benchmark compares the
/// two in one process); a no-op otherwise. Recording is on after install.
void set_chain_recording(bool on) noexcept;

/// Re-evaluates which chains are hot: committed at least `hot_calls` times and holding at least `share` of the
/// profiled device time of every signature. Returns the number of hot chains. Call from a background thread.
size_t update_hot_chains(int64_t hot_calls, double share);

}  // namespace cudal1::dispatcher
