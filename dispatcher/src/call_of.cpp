/// @brief Parsing a signature's text back into a boxed call (see call_of.h).
#include "cudal1/dispatcher/call_of.h"

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::dispatcher {
namespace {

Status bad(const std::string& what) { return Status(Code::kInvalidArgument, what); }

/// Splits `s` at the top-level ", " separators (outside brackets, braces and quotes).
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'') quoted = !quoted;
    if (quoted) continue;
    if (c == '[' || c == '{' || c == '(') ++depth;
    if (c == ']' || c == '}' || c == ')') --depth;
    if (depth == 0 && c == ',' && i + 1 < s.size() && s[i + 1] == ' ') {
      out.push_back(s.substr(start, i - start));
      start = i + 2;
      ++i;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::optional<int64_t> parse_int(const std::string& s) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
  return v;
}

std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

/// "[a, b]" (IValue lists) or "a,b" (tensor sizes) into ints.
std::optional<std::vector<int64_t>> parse_ints(const std::string& body, bool spaced) {
  std::vector<int64_t> v;
  if (body.empty()) return v;
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (spaced && start > 0) {
      if (item.empty() || item[0] != ' ') return std::nullopt;
      item.erase(0, 1);
    }
    auto x = parse_int(item);
    if (!x) return std::nullopt;
    v.push_back(*x);
    if (comma == std::string::npos) return v;
    start = comma + 1;
  }
}

std::optional<c10::ScalarType> parse_dtype(const std::string& name) {
  static const c10::ScalarType kTypes[] = {
      c10::ScalarType::Float, c10::ScalarType::Half,  c10::ScalarType::BFloat16, c10::ScalarType::Double,
      c10::ScalarType::Long,  c10::ScalarType::Int,   c10::ScalarType::Short,    c10::ScalarType::Char,
      c10::ScalarType::Byte,  c10::ScalarType::Bool};
  for (c10::ScalarType t : kTypes)
    if (name == dtype_short_name(t)) return t;
  return std::nullopt;
}

/// Elements of storage a tensor of these sizes and strides reaches from offset 0.
std::optional<int64_t> storage_numel(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t n = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) return std::nullopt;
    if (sizes[i] == 0) return 0;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (strides[i] > 0 && sizes[i] - 1 > (std::numeric_limits<int64_t>::max() / 4 - n) / strides[i])
      return std::nullopt;
    n += (sizes[i] - 1) * strides[i];
  }
  return n;
}

/// `f32[64,1024]{1024,1}` or `undefined`.
Result<at::Tensor> parse_tensor(const std::string& tok, c10::Device device, bool fill) {
  if (tok == "undefined") return at::Tensor();
  const size_t lb = tok.find('['), rb = tok.find(']'), lc = tok.find('{'), rc = tok.find('}');
  if (lb == std::string::npos || rb == std::string::npos || lc != rb + 1 || rc == std::string::npos ||
      rc < lc)
    return bad("not a tensor: '" + tok + "'");
  if (rc + 1 != tok.size()) {
    if (tok[rc + 1] == '@')
      return Status(Code::kUnsupported, "a " + tok.substr(rc + 2) + " tensor: only CUDA signatures are rebuilt");
    return bad("trailing text after the tensor '" + tok + "'");
  }
  const auto dtype = parse_dtype(tok.substr(0, lb));
  if (!dtype) return bad("unknown dtype '" + tok.substr(0, lb) + "'");
  const auto sizes = parse_ints(tok.substr(lb + 1, rb - lb - 1), false);
  const auto strides = parse_ints(tok.substr(lc + 1, rc - lc - 1), false);
  if (!sizes || !strides || sizes->size() != strides->size())
    return bad("sizes and strides of '" + tok + "' do not match");
  const auto n = storage_numel(*sizes, *strides);
  if (!n) return bad("negative or too large sizes or strides in '" + tok + "'");
  try {
    at::Tensor base = at::empty({*n}, at::TensorOptions().dtype(*dtype).device(device));
    if (fill && device.type() != c10::DeviceType::Meta && *n > 0) {
      if (at::isFloatingType(*dtype)) base.normal_();
      else if (*dtype == c10::ScalarType::Bool) base.random_(0, 2);
      else base.random_(0, 10);
    }
    return base.as_strided(*sizes, *strides, 0);
  } catch (const std::exception& e) {
    return Status(Code::kUnavailable, "could not allocate '" + tok + "': " + e.what());
  }
}

Result<c10::IValue> parse_value(const std::string& tok, const c10::TypePtr& type, c10::Device device, bool fill);

Result<c10::IValue> parse_list(const std::string& tok, const c10::TypePtr& elem, c10::Device device, bool fill) {
  if (tok.size() < 2 || tok.front() != '[' || tok.back() != ']') return bad("not a list: '" + tok + "'");
  const auto items = split_top(tok.substr(1, tok.size() - 2));
  switch (elem->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: {
      const auto v = parse_ints(tok.substr(1, tok.size() - 2), true);
      if (!v) return bad("not an int list: '" + tok + "'");
      return c10::IValue(*v);
    }
    case c10::TypeKind::FloatType: {
      std::vector<double> v;
      for (const auto& i : items) {
        const auto d = parse_double(i);
        if (!d) return bad("not a float list: '" + tok + "'");
        v.push_back(*d);
      }
      return c10::IValue(v);
    }
    case c10::TypeKind::BoolType: {
      c10::List<bool> v;
      for (const auto& i : items) {
        if (i != "True" && i != "False") return bad("not a bool list: '" + tok + "'");
        v.push_back(i == "True");
      }
      return c10::IValue(v);
    }
    case c10::TypeKind::TensorType: {
      c10::List<at::Tensor> v;
      for (const auto& i : items) {
        CUDAL1_ASSIGN_OR_RETURN(at::Tensor t, parse_tensor(i, device, fill));
        v.push_back(std::move(t));
      }
      return c10::IValue(v);
    }
    default:
      return Status(Code::kUnsupported, "list of " + elem->str() + " arguments");
  }
}

Result<c10::IValue> parse_value(const std::string& tok, const c10::TypePtr& type, c10::Device device, bool fill) {
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      if (tok == "None") return c10::IValue();
      return parse_value(tok, type->castRaw<c10::OptionalType>()->getElementType(), device, fill);
    case c10::TypeKind::TensorType: {
      CUDAL1_ASSIGN_OR_RETURN(at::Tensor t, parse_tensor(tok, device, fill));
      return c10::IValue(std::move(t));
    }
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType: {
      const auto v = parse_int(tok);
      if (!v) return bad("not an int: '" + tok + "'");
      return c10::IValue(*v);
    }
    case c10::TypeKind::FloatType: {
      const auto v = parse_double(tok);
      if (!v) return bad("not a float: '" + tok + "'");
      return c10::IValue(*v);
    }
    case c10::TypeKind::BoolType:
      if (tok != "True" && tok != "False") return bad("not a bool: '" + tok + "'");
      return c10::IValue(tok == "True");
    case c10::TypeKind::NumberType: {  // a Scalar: what describe_call wrote for an int, a double or a bool
      if (tok == "True" || tok == "False") return c10::IValue(tok == "True");
      if (const auto i = parse_int(tok)) return c10::IValue(*i);
      if (const auto d = parse_double(tok)) return c10::IValue(*d);
      return bad("not a number: '" + tok + "'");
    }
    case c10::TypeKind::StringType:
      if (tok.size() < 2 || tok.front() != '\'' || tok.back() != '\'') return bad("not a string: '" + tok + "'");
      return c10::IValue(tok.substr(1, tok.size() - 2));
    case c10::TypeKind::ListType:
      return parse_list(tok, type->castRaw<c10::ListType>()->getElementType(), device, fill);
    default:
      return Status(Code::kUnsupported, "argument of type " + type->str());
  }
}

Result<RebuiltCall> rebuild(const std::string& text, c10::Device device, bool fill) {
  const size_t open = text.find('(');
  if (open == std::string::npos || text.back() != ')') return bad("not a signature: '" + text + "'");
  const std::string full = text.substr(0, open);
  const size_t dot = full.find('.');
  const std::string name = full.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
  const auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!op) return Status(Code::kNotFound, "no operator " + full + " in this LibTorch");
  const auto& args = op->schema().arguments();
  const auto toks = split_top(text.substr(open + 1, text.size() - open - 2));
  if (toks.size() != args.size())
    return bad(full + " takes " + std::to_string(args.size()) + " arguments, the text has " +
               std::to_string(toks.size()));
  RebuiltCall call{*op, {}};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string tok = toks[i];
    if (args[i].kwarg_only()) {
      const std::string prefix = args[i].name() + "=";
      if (tok.compare(0, prefix.size(), prefix) != 0) return bad("argument " + args[i].name() + " is not named");
      tok.erase(0, prefix.size());
    }
    auto v = parse_value(tok, args[i].type(), device, fill);
    if (!v.ok()) return Status(v.status().code(), "argument " + args[i].name() + ": " + v.status().message());
    call.stack.push_back(std::move(v).value());
  }
  std::string back = describe_call(call.op, call.stack, call.stack.size());
  if (device.type() != c10::DeviceType::CUDA) {
    const std::string mark = std::string("@") + c10::DeviceTypeName(device.type(), /*lower_case=*/true);
    for (size_t p; (p = back.find(mark)) != std::string::npos;) back.erase(p, mark.size());
  }
  if (back != text) return bad("the rebuilt call reads '" + back + "'");
  return call;
}

}  // namespace

Result<RebuiltCall> rebuild_call(const std::string& text, c10::Device device, bool fill) {
  try {
    return rebuild(text, device, fill);
  } catch (const std::exception& e) {
    return Status(Code::kInvalidArgument, std::string("could not rebuild the call: ") + e.what());
  }
}

}  // namespace cudal1::dispatcher
