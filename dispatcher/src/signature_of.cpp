/// @brief Word encoding and readable text of a boxed call's arguments.
#include "cudal1/dispatcher/signature_of.h"

#include <c10/util/hash.h>

#include <cstring>
#include <sstream>

namespace cudal1::dispatcher {
namespace {

int64_t tag(ArgTag t) { return static_cast<int64_t>(t); }

int64_t double_bits(double d) {
  int64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

int64_t string_word(const std::string& s) {  // in-process only; the text carries the string itself
  return static_cast<int64_t>(std::hash<std::string_view>()(s));
}

bool keyable_dtype(c10::ScalarType t) {
  return !c10::isQIntType(t) && !c10::isComplexType(t) && t != c10::ScalarType::Undefined;
}

/// Encodes one tensor; false if it cannot be keyed or sits on another device than earlier tensors.
bool encode_tensor(const at::Tensor& t, SigKey* k) {
  auto& w = k->words;
  if (!t.defined()) {
    w.push_back(tag(ArgTag::kTensor));
    w.push_back(-1);
    return true;
  }
  if (t.layout() != c10::kStrided || !keyable_dtype(t.scalar_type())) return false;
  const c10::Device d = t.device();
  const int idx = d.has_index() ? d.index() : -1;
  if (!k->has_tensor) {
    k->has_tensor = true;
    k->device_type = d.type();
    k->device_index = idx;
  } else if (d.type() != k->device_type || idx != k->device_index) {
    return false;
  }
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  w.push_back(tag(ArgTag::kTensor));
  w.push_back(static_cast<int64_t>(t.scalar_type()) | (static_cast<int64_t>(d.type()) << 8) |
              (static_cast<int64_t>(sizes.size()) << 16));
  w.append(sizes.begin(), sizes.end());
  w.append(strides.begin(), strides.end());
  return true;
}

bool encode_ivalue(const c10::IValue& v, SigKey* k) {
  auto& w = k->words;
  if (v.isTensor()) return encode_tensor(v.toTensor(), k);
  if (v.isNone()) return w.push_back(tag(ArgTag::kNone)), true;
  if (v.isBool()) return w.push_back(tag(ArgTag::kBool)), w.push_back(v.toBool()), true;
  if (v.isInt()) return w.push_back(tag(ArgTag::kInt)), w.push_back(v.toInt()), true;
  if (v.isDouble()) return w.push_back(tag(ArgTag::kDouble)), w.push_back(double_bits(v.toDouble())), true;
  if (v.isSymInt()) {
    const auto s = v.toSymInt();
    if (s.is_symbolic()) return false;
    w.push_back(tag(ArgTag::kInt));
    w.push_back(s.expect_int());
    return true;
  }
  if (v.isString()) return w.push_back(tag(ArgTag::kString)), w.push_back(string_word(v.toStringRef())), true;
  if (v.isIntList()) {
    const auto l = v.toIntList();
    w.push_back(tag(ArgTag::kIntList));
    w.push_back(static_cast<int64_t>(l.size()));
    for (int64_t x : l) w.push_back(x);
    return true;
  }
  if (v.isDoubleList()) {
    const auto l = v.toDoubleList();
    w.push_back(tag(ArgTag::kDoubleList));
    w.push_back(static_cast<int64_t>(l.size()));
    for (double x : l) w.push_back(double_bits(x));
    return true;
  }
  if (v.isTensorList()) {
    const auto l = v.toTensorList();
    w.push_back(tag(ArgTag::kTensorList));
    w.push_back(static_cast<int64_t>(l.size()));
    for (const at::Tensor& t : l)
      if (!encode_tensor(t, k)) return false;
    return true;
  }
  if (v.isList()) {  // e.g. SymInt[] on torch 2.x, bool[]
    const auto l = v.toListRef();
    w.push_back(tag(ArgTag::kOther));
    w.push_back(static_cast<int64_t>(l.size()));
    for (const auto& x : l)
      if (x.isTensor() || !encode_ivalue(x, k)) return false;
    return true;
  }
  return false;  // Generator, Device, Storage, complex scalars, ...: not keyed
}

void describe_tensor(std::ostream& os, const at::Tensor& t) {
  if (!t.defined()) {
    os << "undefined";
    return;
  }
  os << dtype_short_name(t.scalar_type()) << '[';
  const auto s = t.sizes();
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]{";
  const auto st = t.strides();
  for (size_t i = 0; i < st.size(); ++i) os << (i ? "," : "") << st[i];
  os << '}';
  if (t.device().type() != c10::DeviceType::CUDA) os << '@' << c10::DeviceTypeName(t.device().type(), true);
}

void describe_ivalue(std::ostream& os, const c10::IValue& v) {
  if (v.isTensor()) return describe_tensor(os, v.toTensor());
  if (v.isString()) {
    os << '\'' << v.toStringRef() << '\'';
    return;
  }
  if (v.isDouble()) {  // an integral double keeps a ".0", so that it never reads as the int of the same value
    std::ostringstream d;
    d.precision(17);
    d << v.toDouble();
    const std::string t = d.str();
    os << t << (t.find_first_of(".eEna") == std::string::npos ? ".0" : "");
    return;
  }
  if (v.isTensorList()) {
    os << '[';
    bool first = true;
    for (const at::Tensor& t : v.toTensorList()) {
      os << (first ? "" : ", ");
      describe_tensor(os, t);
      first = false;
    }
    os << ']';
    return;
  }
  os << v;  // ints, bools, None, lists
}

}  // namespace

const char* dtype_short_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Double: return "f64";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Short: return "i16";
    case c10::ScalarType::Char: return "i8";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Bool: return "b8";
    default: return c10::toString(t);
  }
}

void key_begin(const c10::OperatorHandle& op, SigKey* key) {
  key->words.clear();
  key->has_tensor = false;
  key->words.push_back(reinterpret_cast<int64_t>(&op.schema()));  // stable for the op's lifetime
}

bool key_add(const c10::IValue& v, SigKey* key) { return encode_ivalue(v, key); }
bool key_add(const at::Tensor& t, SigKey* key) { return encode_tensor(t, key); }
bool key_add(c10::string_view s, SigKey* key) {
  key->words.push_back(tag(ArgTag::kString));
  key->words.push_back(string_word(std::string(s.data(), s.size())));
  return true;
}

bool key_add(int64_t v, SigKey* key) { return encode_ivalue(c10::IValue(v), key); }
bool key_add(bool v, SigKey* key) { return encode_ivalue(c10::IValue(v), key); }

bool key_add(c10::IntArrayRef v, SigKey* key) {  // as encode_ivalue's IntList branch
  auto& w = key->words;
  w.push_back(tag(ArgTag::kIntList));
  w.push_back(static_cast<int64_t>(v.size()));
  w.append(v.begin(), v.end());
  return true;
}

bool key_add(c10::SymIntArrayRef v, SigKey* key) {  // boxed as an IntList when every element is concrete
  auto& w = key->words;
  w.push_back(tag(ArgTag::kIntList));
  w.push_back(static_cast<int64_t>(v.size()));
  for (const c10::SymInt& s : v) {
    if (s.is_symbolic()) return false;
    w.push_back(s.expect_int());
  }
  return true;
}

bool key_add(c10::OptionalIntArrayRef v, SigKey* key) {  // boxed as the int list, or None
  if (v.has_value()) return key_add(*v, key);
  key->words.push_back(tag(ArgTag::kNone));
  return true;
}

bool key_add(const c10::optional<at::Tensor>& t, SigKey* key) {  // boxed as the tensor, or None
  if (t.has_value()) return encode_tensor(*t, key);
  key->words.push_back(tag(ArgTag::kNone));
  return true;
}

bool key_finish(SigKey* key) {
  if (!key->has_tensor) return false;
  key->hash = hash_words(key->words.data(), key->words.size());
  return true;
}

bool encode_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs, SigKey* key) {
  key_begin(op, key);
  if (stack.size() < nargs) return false;
  const c10::IValue* args = stack.data() + (stack.size() - nargs);
  for (size_t i = 0; i < nargs; ++i)
    if (!encode_ivalue(args[i], key)) return false;
  return key_finish(key);
}

std::string describe_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs) {
  std::ostringstream os;
  const auto& name = op.operator_name();
  os << name.name;
  if (!name.overload_name.empty()) os << '.' << name.overload_name;
  os << '(';
  const auto& schema_args = op.schema().arguments();
  const c10::IValue* args = stack.data() + (stack.size() - nargs);
  for (size_t i = 0; i < nargs; ++i) {
    if (i) os << ", ";
    if (i < schema_args.size() && schema_args[i].kwarg_only()) os << schema_args[i].name() << '=';
    describe_ivalue(os, args[i]);
  }
  os << ')';
  return os.str();
}

std::vector<ArgSpec> arg_specs(const torch::jit::Stack& stack, size_t nargs) {
  std::vector<ArgSpec> out(nargs);
  const c10::IValue* args = stack.data() + (stack.size() - nargs);
  for (size_t i = 0; i < nargs; ++i) {
    if (args[i].isTensor()) {
      const at::Tensor& t = args[i].toTensor();
      out[i].is_tensor = true;
      out[i].tensor.defined = t.defined();
      if (t.defined()) {
        out[i].tensor.dtype = t.scalar_type();
        out[i].tensor.sizes = t.sizes().vec();
        out[i].tensor.strides = t.strides().vec();
        out[i].tensor.storage_offset = t.storage_offset();
      }
    } else if (!args[i].isTensorList()) {  // tensor lists stay None: records never keep tensors alive
      out[i].value = args[i];
    }
  }
  return out;
}

}  // namespace cudal1::dispatcher
