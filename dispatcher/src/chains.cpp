/// @brief Chain profiling: the per-thread builder, the chain table and records (Note [Chain profiling]).
#include "cudal1/dispatcher/chains.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "cudal1/core/signature.h"
#include "region.h"

namespace cudal1::dispatcher {
namespace {

c10::weak_intrusive_ptr<c10::TensorImpl> weak_of(const at::Tensor& t) {
  return c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr());
}

bool same_target(const c10::weak_intrusive_ptr<c10::TensorImpl>& w, const at::Tensor& t) {
  return w._unsafe_get_target() == t.unsafeGetTensorImpl();
}

/// The key words of a chain: sizes, then per node its signature hash, device and inputs' sources.
template <typename NodeOf>
void chain_key(size_t n, NodeOf&& node_of, int externals, std::vector<int64_t>* k) {
  k->clear();
  k->push_back(static_cast<int64_t>(n));
  k->push_back(externals);
  for (size_t i = 0; i < n; ++i) {
    const ChainNode& nd = node_of(i);
    k->push_back(static_cast<int64_t>(nd.rec->sig.hash));
    k->push_back(nd.rec->device_index);
    k->push_back(static_cast<int64_t>(nd.inputs.size()));
    for (const auto& in : nd.inputs) {
      k->push_back(static_cast<int64_t>((static_cast<uint64_t>(static_cast<uint32_t>(in.producer)) << 32) |
                                        static_cast<uint32_t>(in.index)));
      if (in.view) k->push_back(-3);  // never a source word: an index is >= -1 (chains without views keep their keys)
    }
  }
}

}  // namespace

const char* chain_state_name(ChainState s) noexcept {
  switch (s) {
    case ChainState::kCold: return "cold";
    case ChainState::kHot: return "hot";
    case ChainState::kAten: return "aten";
    case ChainState::kFused: return "fused";
    case ChainState::kDiverged: return "diverged";
  }
  return "?";
}

ChainRecord::ChainRecord(uint64_t h, std::vector<int64_t> k, std::vector<ChainNode> n, int ext)
    : hash(h), key(std::move(k)), nodes(std::move(n)), externals(ext), same_(static_cast<size_t>(ext), 0) {}

bool is_tensor_argument(const c10::Argument& a) {
  const auto& t = a.type();
  if (t->kind() == c10::TypeKind::TensorType) return true;
  return t->kind() == c10::TypeKind::OptionalType &&
         t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
}

double ChainRecord::mean_us() const {
  double us = 0;
  for (const auto& n : nodes) us += n.rec->mean_us();
  return us;
}

double ChainRecord::est_total_us() const { return mean_us() * static_cast<double>(count.load()); }

ChainOutcome ChainRecord::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

void ChainRecord::set_outcome(ChainOutcome o) {
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = std::move(o);
}

std::vector<uint64_t> ChainRecord::same_external() const {
  std::lock_guard<std::mutex> lock(mu_);
  return same_;
}

std::vector<at::Tensor> ChainRecord::last_externals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<at::Tensor> out(last_ext_.size());
  for (size_t i = 0; i < last_ext_.size(); ++i)
    if (c10::intrusive_ptr<c10::TensorImpl> p = last_ext_[i].lock())
      out[i] = at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(p.release()));
  return out;
}

std::string ChainRecord::text() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes.size(); ++i) {
    os << (i ? "\n" : "") << "%" << i << " = " << nodes[i].rec->sig.text << " <-";
    for (const auto& in : nodes[i].inputs) {
      if (in.producer >= 0)
        os << " %" << in.producer << "." << in.index << (in.view ? ":view" : "");
      else if (in.index >= 0)
        os << " ext" << in.index;
      else
        os << " none";
    }
  }
  return os.str();
}

void ChainRecord::note_commit(const std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>>& ext,
                              const std::vector<uint32_t>& versions) {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ext_.size() == ext.size()) {
    for (size_t i = 0; i < ext.size() && i < same_.size(); ++i)
      if (last_ext_[i]._unsafe_get_target() == ext[i]._unsafe_get_target() && last_versions_[i] == versions[i])
        ++same_[i];
  }
  last_ext_ = ext;  // weak: keeps the TensorImpl's memory (so its address unique), never its storage
  last_versions_ = versions;
}

std::pair<ChainRecord*, bool> ChainTable::find_or_insert(uint64_t hash, const std::vector<int64_t>& key,
                                                         const std::vector<ChainNode>& nodes, int externals) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : records_)
    if (r->hash == hash && r->key == key) return {r.get(), false};
  records_.push_back(std::make_unique<ChainRecord>(hash, key, nodes, externals));
  return {records_.back().get(), true};
}

bool has_view_input(const std::vector<ChainNode>& nodes) {
  for (const ChainNode& n : nodes)
    for (const ChainInput& in : n.inputs)
      if (in.view) return true;
  return false;
}

int externals_read(const std::vector<ChainNode>& nodes) {
  int externals = 0;
  for (const ChainNode& n : nodes)
    for (const ChainInput& in : n.inputs)
      if (in.producer < 0 && in.index >= 0) externals = std::max(externals, in.index + 1);
  return externals;
}

ChainRecord* ChainTable::find_or_insert(const std::vector<ChainNode>& nodes, int externals) {
  std::vector<int64_t> key;
  chain_key(nodes.size(), [&](size_t i) -> const ChainNode& { return nodes[i]; }, externals, &key);
  return find_or_insert(hash_words(key.data(), key.size()), key, nodes, externals).first;
}

void ChainTable::for_each(const std::function<void(ChainRecord&)>& fn) const {
  std::vector<ChainRecord*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : records_) all.push_back(r.get());
  }
  for (ChainRecord* r : all) fn(*r);
}

size_t ChainTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.size();
}

ChainRecord* ChainBuilder::observe(const Call& call, ChainTable& table) {
  if (call.conv && !programs_) return nullptr;  // Note [Program chains]: an ordinary chain never sees one
  ChainRecord* committed = nullptr;
  if (n_ >= static_cast<size_t>(programs_ ? kMaxProgramNodes : kMaxChainNodes)) committed = close(table);
  if (nodes_.size() == n_) nodes_.emplace_back();
  Open& open = nodes_[n_];  // the slot past the open chain: fill it, then admit it
  open.node.rec = call.rec;
  open.node.inplace = call.inplace;
  open.node.inputs.clear();
  open.outputs.clear();
  bool connected = false;
  for (const at::Tensor* t : call.args) {
    ChainInput in{-1, -1};
    if (t && t->defined()) {
      // The newest open node that produced it (Note [In-place nodes]); the index holds only nodes < n_.
      if (const auto it = produced_.find(t->unsafeGetTensorImpl()); it != produced_.end()) in = it->second;
      if (in.producer < 0 && (call.bmm || open_bmm_ > 0 || (!programs_ && open_storage(*t))))
        in = view_source(*t, call.bmm);  // Note [Matmul views]; Note [Row views]
      connected |= in.producer >= 0;
      if (in.producer < 0 && n_ > 0)  // or a tensor the previous call read from outside: x*0.5 then pow(x, 3)
        for (const ChainInput& prev : nodes_[n_ - 1].node.inputs)
          if (prev.producer < 0 && prev.index >= 0 && same_target(externals_[prev.index], *t)) connected = true;
    }
    open.node.inputs.push_back(in);
  }
  if (!connected && n_ > 0) {  // the call breaks the chain: close it, then the call's slot becomes the first
    const size_t slot = n_;
    ChainRecord* r = close(table);
    committed = r ? r : committed;
    std::swap(nodes_[0], nodes_[slot]);
  }
  has_conv_ = has_conv_ || call.conv;
  Open& cur = nodes_[n_];
  cur.bmm = call.bmm;
  cur.storages.clear();
  open_bmm_ += call.bmm;
  for (size_t i = 0; i < call.args.size(); ++i) {  // external slots, numbered by first use in the chain
    const at::Tensor* t = call.args[i];
    ChainInput& in = cur.node.inputs[i];
    if (in.producer >= 0 || !t || !t->defined()) continue;
    int slot = -1;
    if (const auto it = ext_slots_.find(t->unsafeGetTensorImpl()); it != ext_slots_.end()) slot = it->second;
    if (slot < 0) {
      slot = static_cast<int>(externals_.size());
      externals_.push_back(weak_of(*t));
      ext_versions_.push_back(detail::version_of(*t));
      ext_slots_[t->unsafeGetTensorImpl()] = slot;
    }
    in.index = slot;
  }
  cur.node.outputs.resize(call.outputs.size());  // reuses the slot's capacity: no allocation once warm
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    const at::Tensor* t = call.outputs[i];
    const bool def = t && t->defined();
    cur.outputs.push_back(def ? weak_of(*t) : c10::weak_intrusive_ptr<c10::TensorImpl>(
                                                  c10::intrusive_ptr<c10::TensorImpl>()));
    if (call.bmm || !programs_)  // Note [Matmul views], Note [Row views]
      cur.storages.push_back(def && t->has_storage() ? t->storage().getWeakStorageImpl()
                                                     : c10::weak_intrusive_ptr<c10::StorageImpl>(
                                                           c10::intrusive_ptr<c10::StorageImpl>()));
    TensorSpec& spec = cur.node.outputs[i];
    spec.defined = def;
    if (!def) continue;
    produced_[t->unsafeGetTensorImpl()] = ChainInput{static_cast<int>(n_), static_cast<int>(i)};
    spec.dtype = t->scalar_type();
    spec.sizes.assign(t->sizes().begin(), t->sizes().end());
    spec.strides.assign(t->strides().begin(), t->strides().end());
    spec.storage_offset = t->storage_offset();
  }
  ++n_;
  return committed;
}

bool contiguous_spec(const TensorSpec& s) {
  int64_t expect = 1;
  for (size_t d = s.sizes.size(); d-- > 0;) {
    if (s.sizes[d] != 1 && s.strides[d] != expect) return false;
    expect *= s.sizes[d];
  }
  return true;
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ChainBuilder::open_storage(const at::Tensor& t) const {
  if (n_ == 0 || !t.has_storage()) return false;
  const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  for (size_t j = 0; j < n_; ++j)
    for (const auto& w : nodes_[j].storages)
      if (w._unsafe_get_target() == s) return true;
  return false;
}

ChainInput ChainBuilder::view_source(const at::Tensor& t, bool consumer_bmm) const {
  ChainInput none{-1, -1};
  if (!t.has_storage() || !t.is_contiguous()) return none;
  const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const bool row_view = !programs_ && t.dim() >= 1;  // Note [Row views]: a reshape that keeps the rows' length
  for (size_t j = n_; j-- > 0;) {  // the newest producer first
    const Open& o = nodes_[j];
    if (!o.bmm && !consumer_bmm && !row_view) continue;
    for (size_t i = 0; i < o.node.outputs.size() && i < o.outputs.size(); ++i) {
      bool same = false;
      if (o.bmm || row_view) {  // the output's TensorImpl may be gone (a view in InferenceMode keeps no base)
        same = i < o.storages.size() && o.storages[i]._unsafe_get_target() == s;
      } else if (c10::intrusive_ptr<c10::TensorImpl> p = o.outputs[i].lock()) {
        same = p->has_storage() && p->storage().unsafeGetStorageImpl() == s;
      }
      if (!same) continue;
      const TensorSpec& spec = o.node.outputs[i];
      if (!spec.defined || spec.storage_offset != t.storage_offset() || !contiguous_spec(spec) ||
          numel_of(spec.sizes) != t.numel())
        return none;
      if (!o.bmm && !consumer_bmm && (spec.sizes.empty() || spec.sizes.back() != t.size(-1) || spec.sizes == t.sizes()))
        return none;  // Note [Row views]: only a reshape of the leading dims (the same shape is no reshape)
      ChainInput in{static_cast<int>(j), static_cast<int>(i)};
      in.view = true;
      return in;
    }
  }
  return none;
}

ChainRecord* ChainBuilder::close(ChainTable& table) {
  ChainRecord* rec = nullptr;
  if (n_ >= 2 && (!programs_ || has_conv_)) {
    const int ext = static_cast<int>(externals_.size());
    chain_key(n_, [&](size_t i) -> const ChainNode& { return nodes_[i].node; }, ext, &key_);
    const uint64_t hash = hash_words(key_.data(), key_.size());
    for (ChainRecord* r : recent_)
      if (r && r->hash == hash && r->key == key_) {
        rec = r;
        break;
      }
    if (!rec) {
      std::vector<ChainNode> nodes;
      nodes.reserve(n_);
      for (size_t i = 0; i < n_; ++i) nodes.push_back(nodes_[i].node);
      rec = table.find_or_insert(hash, key_, nodes, ext).first;
      recent_[next_recent_++ % recent_.size()] = rec;
    }
    rec->count.fetch_add(1, std::memory_order_relaxed);
    rec->note_commit(externals_, ext_versions_);
  }
  for (size_t i = 0; i < n_; ++i) {  // release the weak references now
    nodes_[i].outputs.clear();
    nodes_[i].storages.clear();
  }
  open_bmm_ = 0;
  produced_.clear();
  ext_slots_.clear();
  n_ = 0;
  has_conv_ = false;
  externals_.clear();
  ext_versions_.clear();
  return rec;
}

const std::vector<std::string>& chain_ops() {
  // Beyond the families' ops (add/sub/mul/div, where, the unary activations, exp, mean/sum, softmax, norms,
  // batch norm, pooling): powers and roots, log, clamp, erf: what eager code writes RMSNorm, GELU composites
  // and normalisations with. Casts are not among them: `_to_copy` has a BackendSelect kernel of its own, so
  // the hook cannot sit there, and a cast (x.to(float32)) splits a chain.
  // The in-place forms models write activations and residuals with (Note [In-place nodes]).
  static const std::vector<std::string> ops = {"pow.Tensor_Scalar", "rsqrt", "sqrt", "log", "reciprocal",
                                               "clamp", "erf", "relu_", "add_.Tensor", "sub_.Tensor",
                                               "mul_.Tensor", "div_.Tensor", "add_.Scalar", "mul_.Scalar",
                                               "sigmoid_", "tanh_", "silu_", "gelu_",
                                               // Note [Matmul views]: what eager attention's matmuls call
                                               "bmm",
                                               // Note [Program chains]: what a CNN's program chain begins with
                                               "_convolution"};
  return ops;
}

}  // namespace cudal1::dispatcher
