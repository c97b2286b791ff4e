/// @brief Pre-warming a chain (Note [Pre-warming chains]): its calls rebuilt from its cache key, wired as recorded,
/// run through the hook until the chain is recorded, then tuned and cached like a hot chain of an app.
///
/// Note [Pre-warming chains]
/// A chain's cache key (optimizer::chain_cache_key, "chain %0 = <signature> <- ext0 ext1 | %1 = ...", in a run
/// report as each chain's "key") holds every node's signature text and where each tensor argument comes from: an
/// earlier node's output (%p.i), an external slot (extN) or None. warm_chain rebuilds each node's call
/// (dispatcher::rebuild_call, random values), gives every external slot one tensor (the first rebuilt one) and
/// every %p.i argument the output node p returned, and runs the nodes in order through the dispatcher, three
/// times (the open chain closed after each), so the hook records the chain exactly as the app did. The record
/// whose key equals the text is then marked hot and handled by the runtime as any hot chain (Note [Chain tuning]:
/// from the cache, else tuned, verified and stored), one chain at a time. A dry run only parses the text and
/// rebuilds each node on the Meta device.
#include "warm_chain.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <sstream>

#include "cudal1/dispatcher/call_of.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "runtime.h"

namespace cudal1::runtime {
namespace {

struct ParsedNode {
  std::string signature;
  std::vector<dispatcher::ChainInput> inputs;  ///< producer/index as ChainInput: -1/-1 is None
};

Result<std::vector<ParsedNode>> parse_chain(const std::string& key) {
  const std::string prefix = "chain ";
  if (key.rfind(prefix, 0) != 0) return Status(Code::kInvalidArgument, "a chain key starts with 'chain '");
  std::vector<ParsedNode> nodes;
  std::string rest = key.substr(prefix.size());
  size_t pos = 0;
  while (pos <= rest.size()) {
    const size_t bar = rest.find(" | %", pos);
    const std::string line = rest.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos);
    pos = bar == std::string::npos ? rest.size() + 1 : bar + 3;
    const std::string head = "%" + std::to_string(nodes.size()) + " = ";
    if (line.rfind(head, 0) != 0) return Status(Code::kInvalidArgument, "chain node " + std::to_string(nodes.size()) +
                                                                          ": expected '" + head + "'");
    const size_t arrow = line.rfind(" <-");
    if (arrow == std::string::npos || arrow < head.size())
      return Status(Code::kInvalidArgument, "chain node " + std::to_string(nodes.size()) + ": no ' <-' sources");
    ParsedNode n;
    n.signature = line.substr(head.size(), arrow - head.size());
    std::istringstream srcs(line.substr(arrow + 3));
    for (std::string s; srcs >> s;) {
      dispatcher::ChainInput in;
      try {
        if (s == "none") {
          in.producer = -1;
          in.index = -1;
        } else if (s.rfind("ext", 0) == 0) {
          in.index = std::stoi(s.substr(3));
        } else if (s[0] == '%' && s.find('.') != std::string::npos) {
          const std::string kView = ":view";  // Note [Matmul views]
          if (s.size() > kView.size() && s.compare(s.size() - kView.size(), kView.size(), kView) == 0) {
            in.view = true;
            s.resize(s.size() - kView.size());
          }
          size_t used = 0;
          in.producer = std::stoi(s.substr(1, s.find('.') - 1));
          in.index = std::stoi(s.substr(s.find('.') + 1), &used);
          if (s.find('.') + 1 + used != s.size()) throw std::invalid_argument(s);
          if (in.producer < 0 || in.producer >= static_cast<int>(nodes.size()) || in.index < 0)
            return Status(Code::kInvalidArgument, "chain source " + s + " is not an earlier node's output");
        } else {
          return Status(Code::kInvalidArgument, "chain source '" + s + "' is not %p.i, extN or none");
        }
      } catch (const std::exception&) {
        return Status(Code::kInvalidArgument, "chain source '" + s + "' does not parse");
      }
      n.inputs.push_back(in);
    }
    nodes.push_back(std::move(n));
  }
  if (nodes.size() < 2) return Status(Code::kInvalidArgument, "a chain has at least two nodes");
  return nodes;
}

/// Runs the chain once from freshly rebuilt calls; Status on a rebuild or ATen error.
Status run_chain_once(const std::vector<ParsedNode>& nodes, c10::Device device, bool fill) {
  std::vector<std::vector<at::Tensor>> outs(nodes.size());
  std::vector<at::Tensor> ext;
  for (size_t k = 0; k < nodes.size(); ++k) {
    auto call = dispatcher::rebuild_call(nodes[k].signature, device, fill);
    if (!call.ok()) return Status(call.status().code(), "node " + std::to_string(k) + ": " + call.status().message());
    const auto& args = call->op.schema().arguments();
    size_t ti = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      if (!dispatcher::is_tensor_argument(args[a])) continue;
      if (ti >= nodes[k].inputs.size())
        return Status(Code::kInvalidArgument, "node " + std::to_string(k) + ": fewer sources than tensor arguments");
      const dispatcher::ChainInput in = nodes[k].inputs[ti++];
      if (in.producer >= 0) {
        if (device.type() == c10::DeviceType::Meta) continue;  // a dry run runs nothing: no outputs to wire
        const auto& produced = outs[static_cast<size_t>(in.producer)];
        if (static_cast<size_t>(in.index) >= produced.size())
          return Status(Code::kInvalidArgument, "node " + std::to_string(k) + ": node " +
                                                    std::to_string(in.producer) + " has no output " +
                                                    std::to_string(in.index));
        const at::Tensor& p = produced[static_cast<size_t>(in.index)];
        if (in.view) {  // Note [Matmul views]: the reshape the rebuilt call reads, of the producer's output
          if (!call->stack[a].isTensor() || call->stack[a].toTensor().numel() != p.numel())
            return Status(Code::kInvalidArgument, "node " + std::to_string(k) + ": a view of another size");
          const at::Tensor& want = call->stack[a].toTensor();
          call->stack[a] = p.as_strided(want.sizes(), want.strides());
        } else {
          call->stack[a] = p;
        }
      } else if (in.index >= 0) {
        const size_t slot = static_cast<size_t>(in.index);
        if (slot > ext.size()) return Status(Code::kInvalidArgument, "external slots are numbered by first use");
        if (slot == ext.size()) {
          if (!call->stack[a].isTensor()) return Status(Code::kInvalidArgument, "an external that is None");
          ext.push_back(call->stack[a].toTensor());
        } else {
          call->stack[a] = ext[slot];
        }
      }
    }
    if (ti != nodes[k].inputs.size())
      return Status(Code::kInvalidArgument, "node " + std::to_string(k) + ": more sources than tensor arguments");
    if (device.type() == c10::DeviceType::Meta) continue;  // a dry run rebuilds only
    try {
      c10::InferenceMode inference;
      call->op.callBoxed(&call->stack);
    } catch (const std::exception& e) {
      return Status(Code::kInvalidArgument, "node " + std::to_string(k) + ": ATen rejected the call: " + e.what());
    }
    for (const c10::IValue& v : call->stack)
      if (v.isTensor()) outs[k].push_back(v.toTensor());
  }
  return Status();
}

}  // namespace

WarmResult warm_chain(const std::string& key, const WarmOptions& o, double seconds_left) {
  WarmResult res;
  res.signature = key;
  auto done = [&](const char* outcome, std::string note) {
    res.outcome = outcome;
    res.note = std::move(note);
    return res;
  };
  auto nodes = parse_chain(key);
  if (!nodes.ok()) return done("error", nodes.status().to_string());
  if (o.dry_run) {
    const Status s = run_chain_once(nodes.value(), c10::Device(c10::DeviceType::Meta), false);
    return s.ok() ? done("checked", "") : done(s.code() == Code::kUnsupported ? "skipped" : "error", s.to_string());
  }
  const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(o.device));
  for (int i = 0; i < 3; ++i) {  // recorded as the app recorded it; closed each time (no run joins the next)
    const Status s = run_chain_once(nodes.value(), device, true);
    dispatcher::close_chain_on_this_thread();
    if (!s.ok()) return done(s.code() == Code::kUnsupported ? "skipped" : "error", s.to_string());
  }
  dispatcher::ChainRecord* rec = nullptr;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
    if (!rec && c.nodes.front().rec->device_index == o.device && optimizer::chain_cache_key(c) == key) rec = &c;
  });
  if (!rec) return done("skipped", "the hook did not record the chain (an op of it is not hooked in this mode)");
  mark_chain_hot(*rec);
  wait_idle(seconds_left);
  const dispatcher::ChainOutcome out = rec->outcome();
  res.speedup = out.speedup;
  res.variant = out.kernel;
  res.note = out.note;
  const bool from_cache = out.note.find("cache") != std::string::npos;
  switch (rec->state.load()) {
    case dispatcher::ChainState::kFused:
      res.outcome = from_cache ? "cached" : "kernel";
      break;
    case dispatcher::ChainState::kAten:
      res.outcome = from_cache ? "cached" : out.note.rfind("chain: ", 0) == 0 ? "skipped" : "aten";
      break;
    case dispatcher::ChainState::kHot:
      return done("timeout", "still tuning when the time ran out");
    default:
      return done("error", "the chain was not handled (" + out.note + ")");
  }
  if (res.outcome != "skipped")
    if (Status s = check_cached(o.device, key); !s.ok()) return done("error", "tuned, but " + s.message());
  return res;
}

}  // namespace cudal1::runtime
