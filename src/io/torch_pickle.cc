#include "io/torch_pickle.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "io/checked_math.h"

namespace mamba::io {
namespace {

/// Where `s` stops being UTF-8 as Python's unpickler decodes a BINUNICODE string ('utf-8' with
/// 'surrogatepass': no overlong forms or code points past U+10FFFF, encoded surrogates allowed);
/// s.size() when all of it is.
std::size_t utf8_prefix(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int more = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) more = 0;
    else if (c >= 0xC2 && c <= 0xDF) more = 1;
    else if (c == 0xE0) more = 2, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEF) more = 2;
    else if (c == 0xF0) more = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) more = 3;
    else if (c == 0xF4) more = 3, hi = 0x8F;
    else return i;
    if (s.size() - i <= static_cast<std::size_t>(more)) return i;
    for (int k = 1; k <= more; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += static_cast<std::size_t>(more) + 1;
  }
  return i;
}

// ---- values ------------------------------------------------------------------------------------

struct Value;
using VPtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  std::int64_t i = 0;
  double f = 0;
  std::string s;  // kStr text, kGlobal "module.name", kStorage key
  std::vector<VPtr> items;                         // kTuple, kList
  std::vector<std::pair<VPtr, VPtr>> dict;         // kDict
  DType dtype = DType::kF32;                       // kStorage, kTensor
  std::int64_t numel = 0;                          // kStorage
  VPtr storage;                                    // kTensor
  std::int64_t offset = 0;                         // kTensor
  Shape shape;                                     // kTensor
  std::string non_contiguous;                      // kTensor: "size …, stride …" of a strided view (refused by name)
  int depth = 0;                                   // nesting depth (bounded: no deep recursion on free)
  bool sealed = false;  // placed inside another container: may no longer change (so no cycles can form)
};

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kStr: return "str";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kGlobal: return "global";
    case Value::Kind::kStorage: return "storage";
    case Value::Kind::kTensor: return "tensor";
  }
  return "?";
}

constexpr int kMaxDepth = 64;

const char* const kAllowedGlobals[] = {
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
    "torch.FloatStorage",      "torch.BFloat16Storage",          "torch.HalfStorage",
};

const char* opcode_name(std::uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL"; case 0x93: return "STACK_GLOBAL"; case 'i': return "INST"; case 'o': return "OBJ";
    case 0x81: return "NEWOBJ"; case 0x92: return "NEWOBJ_EX"; case 'P': return "PERSID"; case 'Q': return "BINPERSID";
    case 'R': return "REDUCE"; case 'b': return "BUILD"; case 0x82: return "EXT1"; case 0x83: return "EXT2"; case 0x84: return "EXT4";
    case 'I': return "INT"; case 'L': return "LONG"; case 'F': return "FLOAT"; case 'S': return "STRING"; case 'V': return "UNICODE";
    case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES"; case 0x8e: return "BINBYTES8"; case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER"; case 0x98: return "READONLY_BUFFER"; case 0x8b: return "LONG4"; case 'p': return "PUT";
    case 'g': return "GET"; case '2': return "DUP"; case '0': return "POP"; case '1': return "POP_MARK"; case 'l': return "LIST";
    case 'd': return "DICT"; case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET";
    default: return "unknown";
  }
}

class Unpickler {
 public:
  Unpickler(const std::uint8_t* b, std::size_t n, std::string source) : b_(b), n_(n), src_(std::move(source)) {}

  Result<VPtr> run() {
    while (true) {
      if (pos_ >= n_) return fail("truncated pickle: no STOP opcode before the end");
      const std::size_t at = pos_;
      const std::uint8_t op = b_[pos_++];
      op_pos_ = at;
      switch (op) {
        case 0x80: {  // PROTO
          MAMBA_ASSIGN_OR_RETURN(auto v, read_uint(1));
          if (v > 5) return fail(fmt::format("pickle protocol {} is newer than 5", v));
          break;
        }
        case 0x95: { MAMBA_RETURN_IF_ERROR(read_uint(8).status()); break; }  // FRAME: a hint, ignore
        case '}': push(make(Value::Kind::kDict)); break;
        case ')': push(make(Value::Kind::kTuple)); break;
        case ']': push(make(Value::Kind::kList)); break;
        case 'N': push(make(Value::Kind::kNone)); break;
        case 0x88: case 0x89: { auto v = make(Value::Kind::kBool); v->i = op == 0x88; push(v); break; }
        case '(': marks_.push_back(stack_.size()); break;
        case 'X': MAMBA_RETURN_IF_ERROR(op_str(4)); break;     // BINUNICODE
        case 0x8c: MAMBA_RETURN_IF_ERROR(op_str(1)); break;    // SHORT_BINUNICODE
        case 0x8d: MAMBA_RETURN_IF_ERROR(op_str(8)); break;    // BINUNICODE8
        case 'T': MAMBA_RETURN_IF_ERROR(op_str(4)); break;     // BINSTRING
        case 'U': MAMBA_RETURN_IF_ERROR(op_str(1)); break;     // SHORT_BINSTRING
        case 'J': { MAMBA_ASSIGN_OR_RETURN(auto v, read_uint(4)); push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(v))); break; }
        case 'K': { MAMBA_ASSIGN_OR_RETURN(auto v, read_uint(1)); push_int(static_cast<std::int64_t>(v)); break; }
        case 'M': { MAMBA_ASSIGN_OR_RETURN(auto v, read_uint(2)); push_int(static_cast<std::int64_t>(v)); break; }
        case 0x8a: MAMBA_RETURN_IF_ERROR(op_long1()); break;
        case 'G': MAMBA_RETURN_IF_ERROR(op_binfloat()); break;
        case 'c': MAMBA_RETURN_IF_ERROR(op_global()); break;
        case 0x93: MAMBA_RETURN_IF_ERROR(op_stack_global()); break;
        case 'q': { MAMBA_ASSIGN_OR_RETURN(auto k, read_uint(1)); MAMBA_RETURN_IF_ERROR(memo_put(k)); break; }
        case 'r': { MAMBA_ASSIGN_OR_RETURN(auto k, read_uint(4)); MAMBA_RETURN_IF_ERROR(memo_put(k)); break; }
        case 0x94: MAMBA_RETURN_IF_ERROR(memo_put(memo_.size())); break;  // MEMOIZE
        case 'h': { MAMBA_ASSIGN_OR_RETURN(auto k, read_uint(1)); MAMBA_RETURN_IF_ERROR(memo_get(k)); break; }
        case 'j': { MAMBA_ASSIGN_OR_RETURN(auto k, read_uint(4)); MAMBA_RETURN_IF_ERROR(memo_get(k)); break; }
        case 't': MAMBA_RETURN_IF_ERROR(op_tuple_mark()); break;
        case 0x85: MAMBA_RETURN_IF_ERROR(op_tuple_n(1)); break;
        case 0x86: MAMBA_RETURN_IF_ERROR(op_tuple_n(2)); break;
        case 0x87: MAMBA_RETURN_IF_ERROR(op_tuple_n(3)); break;
        case 'Q': MAMBA_RETURN_IF_ERROR(op_binpersid()); break;
        case 'R': MAMBA_RETURN_IF_ERROR(op_reduce()); break;
        case 'b': MAMBA_RETURN_IF_ERROR(op_build()); break;
        case 's': MAMBA_RETURN_IF_ERROR(op_setitems(/*mark=*/false)); break;
        case 'u': MAMBA_RETURN_IF_ERROR(op_setitems(/*mark=*/true)); break;
        case 'a': MAMBA_RETURN_IF_ERROR(op_appends(/*mark=*/false)); break;
        case 'e': MAMBA_RETURN_IF_ERROR(op_appends(/*mark=*/true)); break;
        case '.': {  // STOP
          if (stack_.size() != 1 || !marks_.empty()) return fail(fmt::format("STOP with {} values on the stack (expected 1)", stack_.size()));
          return stack_.back();
        }
        default:
          return fail(fmt::format("unsupported pickle opcode 0x{:02x} ('{}', {}): torch.save(state_dict) does not write it",
                                  op, op >= 0x20 && op < 0x7f ? std::string(1, static_cast<char>(op)) : std::string("\\x") + fmt::format("{:02x}", op),
                                  opcode_name(op)));
      }
    }
  }

 private:
  Error fail(const std::string& what) const {
    return make_error(ErrorCode::kFormat, fmt::format("{}: pickle byte {}: {}", src_, op_pos_, what));
  }

  VPtr make(Value::Kind k) const {
    auto v = std::make_shared<Value>();
    v->kind = k;
    return v;
  }
  void push(VPtr v) { stack_.push_back(std::move(v)); }
  void push_int(std::int64_t x) {
    auto v = make(Value::Kind::kInt);
    v->i = x;
    push(v);
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Result<VPtr> pop() {
    if (stack_.size() <= floor()) return fail("stack underflow");
    VPtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Result<std::vector<VPtr>> pop_mark() {
    if (marks_.empty()) return fail("no MARK on the stack");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<VPtr> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)), std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  Result<std::uint64_t> read_uint(int nbytes) {
    if (n_ - pos_ < static_cast<std::size_t>(nbytes)) return fail("truncated pickle: opcode argument runs past the end");
    std::uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; --i) v = (v << 8) | b_[pos_ + static_cast<std::size_t>(i)];
    pos_ += static_cast<std::size_t>(nbytes);
    return v;
  }
  Status op_str(int len_bytes) {
    MAMBA_ASSIGN_OR_RETURN(std::uint64_t len, read_uint(len_bytes));
    if (len > n_ - pos_) return fail(fmt::format("truncated pickle: string of {} bytes runs past the end", len));
    auto v = make(Value::Kind::kStr);
    v->s.assign(reinterpret_cast<const char*>(b_ + pos_), static_cast<std::size_t>(len));
    // Python's unpickler refuses such a string too (UnicodeDecodeError): a damaged file, whose
    // bytes would otherwise reach error messages as names.
    if (const std::size_t bad = utf8_prefix(v->s); bad != v->s.size())
      return fail(fmt::format("a string of {} bytes is not valid UTF-8 (byte 0x{:02X} at its offset {}): the file is damaged", len,
                              static_cast<unsigned char>(v->s[bad]), bad));
    pos_ += static_cast<std::size_t>(len);
    push(v);
    return {};
  }
  Status op_long1() {
    MAMBA_ASSIGN_OR_RETURN(std::uint64_t len, read_uint(1));
    if (len > 8) return fail(fmt::format("LONG1 integer of {} bytes is too large", len));
    MAMBA_ASSIGN_OR_RETURN(std::uint64_t raw, read_uint(static_cast<int>(len)));
    std::int64_t x = 0;
    if (len > 0) {
      const unsigned bits = static_cast<unsigned>(len) * 8;
      if (bits < 64 && (raw >> (bits - 1)) & 1) raw |= ~std::uint64_t{0} << bits;  // sign-extend
      std::memcpy(&x, &raw, 8);
    }
    push_int(x);
    return {};
  }
  Status op_binfloat() {
    if (n_ - pos_ < 8) return fail("truncated pickle: BINFLOAT argument runs past the end");
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u = (u << 8) | b_[pos_ + static_cast<std::size_t>(i)];  // big-endian
    pos_ += 8;
    auto v = make(Value::Kind::kFloat);
    std::memcpy(&v->f, &u, 8);
    push(v);
    return {};
  }
  Result<std::string> read_line() {
    const std::size_t start = pos_;
    while (pos_ < n_ && b_[pos_] != '\n') ++pos_;
    if (pos_ >= n_) return fail("truncated pickle: GLOBAL argument without a newline");
    std::string s(reinterpret_cast<const char*>(b_ + start), pos_ - start);
    ++pos_;
    return s;
  }
  Status push_global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    for (const char* a : kAllowedGlobals) {
      if (full == a) {
        auto v = make(Value::Kind::kGlobal);
        v->s = full;
        push(v);
        return {};
      }
    }
    return fail(fmt::format("forbidden pickle global '{}': only collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                            "torch._utils._rebuild_parameter and torch.{{Float,BFloat16,Half}}Storage are allowed (nothing is executed)",
                            full));
  }
  Status op_global() {
    MAMBA_ASSIGN_OR_RETURN(std::string module, read_line());
    MAMBA_ASSIGN_OR_RETURN(std::string name, read_line());
    return push_global(module, name);
  }
  Status op_stack_global() {
    MAMBA_ASSIGN_OR_RETURN(VPtr name, pop());
    MAMBA_ASSIGN_OR_RETURN(VPtr module, pop());
    if (name->kind != Value::Kind::kStr || module->kind != Value::Kind::kStr) return fail("STACK_GLOBAL needs two strings");
    return push_global(module->s, name->s);
  }
  Status memo_put(std::uint64_t key) {
    if (stack_.size() <= floor()) return fail("memo store with an empty stack");
    memo_[key] = stack_.back();
    return {};
  }
  Status memo_get(std::uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return fail(fmt::format("memo key {} was never stored", key));
    push(it->second);
    return {};
  }
  // Containers become immutable once placed inside another one; a container never holds itself.
  // Together this rules out reference cycles (which would leak) and keeps depth exact.
  Status adopt(Value& parent, std::vector<VPtr>& children) {
    if (parent.sealed) return fail(fmt::format("a {} is modified after being placed in another container", kind_name(parent.kind)));
    for (auto& c : children) {
      if (c.get() == &parent) return fail(fmt::format("a {} contains itself", kind_name(parent.kind)));
      c->sealed = true;
    }
    return {};
  }
  Status set_depth(Value& v) {
    int d = 0;
    for (const auto& c : v.items) d = std::max(d, c->depth);
    for (const auto& kv : v.dict) d = std::max({d, kv.first->depth, kv.second->depth});
    v.depth = d + 1;
    if (v.depth > kMaxDepth) return fail(fmt::format("values nested deeper than {}", kMaxDepth));
    return {};
  }
  Status op_tuple_mark() {
    MAMBA_ASSIGN_OR_RETURN(auto items, pop_mark());
    auto v = make(Value::Kind::kTuple);
    MAMBA_RETURN_IF_ERROR(adopt(*v, items));
    v->items = std::move(items);
    MAMBA_RETURN_IF_ERROR(set_depth(*v));
    push(v);
    return {};
  }
  Status op_tuple_n(int n) {
    auto v = make(Value::Kind::kTuple);
    v->items.resize(static_cast<std::size_t>(n));
    for (int i = n - 1; i >= 0; --i) {
      MAMBA_ASSIGN_OR_RETURN(v->items[static_cast<std::size_t>(i)], pop());
    }
    MAMBA_RETURN_IF_ERROR(adopt(*v, v->items));
    MAMBA_RETURN_IF_ERROR(set_depth(*v));
    push(v);
    return {};
  }
  Status op_setitems(bool mark) {
    std::vector<VPtr> kv;
    if (mark) {
      MAMBA_ASSIGN_OR_RETURN(kv, pop_mark());
    } else {
      kv.resize(2);
      MAMBA_ASSIGN_OR_RETURN(kv[1], pop());
      MAMBA_ASSIGN_OR_RETURN(kv[0], pop());
    }
    if (kv.size() % 2 != 0) return fail("SETITEMS with an odd number of values");
    if (stack_.size() <= floor()) return fail("SETITEMS without a dict");
    Value& d = *stack_.back();
    if (d.kind != Value::Kind::kDict) return fail(fmt::format("SETITEMS on a {} (expected a dict)", kind_name(d.kind)));
    MAMBA_RETURN_IF_ERROR(adopt(d, kv));
    for (std::size_t i = 0; i < kv.size(); i += 2) d.dict.emplace_back(kv[i], kv[i + 1]);
    return set_depth(d);
  }
  Status op_appends(bool mark) {
    std::vector<VPtr> xs;
    if (mark) {
      MAMBA_ASSIGN_OR_RETURN(xs, pop_mark());
    } else {
      xs.resize(1);
      MAMBA_ASSIGN_OR_RETURN(xs[0], pop());
    }
    if (stack_.size() <= floor()) return fail("APPENDS without a list");
    Value& l = *stack_.back();
    if (l.kind != Value::Kind::kList) return fail(fmt::format("APPENDS on a {} (expected a list)", kind_name(l.kind)));
    MAMBA_RETURN_IF_ERROR(adopt(l, xs));
    for (auto& x : xs) l.items.push_back(std::move(x));
    return set_depth(l);
  }
  Status op_build() {
    MAMBA_ASSIGN_OR_RETURN(VPtr state, pop());
    if (stack_.size() <= floor()) return fail("BUILD without an object");
    // torch.save(state_dict) builds an OrderedDict with its `_metadata` attribute: ignored.
    if (stack_.back()->kind != Value::Kind::kDict) return fail(fmt::format("BUILD on a {} (only the state dict's OrderedDict may be built)", kind_name(stack_.back()->kind)));
    return {};
  }
  Status op_binpersid() {
    MAMBA_ASSIGN_OR_RETURN(VPtr pid, pop());
    const auto& it = pid->items;
    if (pid->kind != Value::Kind::kTuple || it.size() != 5 || it[0]->kind != Value::Kind::kStr || it[0]->s != "storage" ||
        it[1]->kind != Value::Kind::kGlobal || it[2]->kind != Value::Kind::kStr || it[4]->kind != Value::Kind::kInt) {
      return fail("persistent id is not ('storage', StorageType, key, location, numel)");
    }
    auto v = make(Value::Kind::kStorage);
    const std::string& t = it[1]->s;
    if (t == "torch.FloatStorage") v->dtype = DType::kF32;
    else if (t == "torch.BFloat16Storage") v->dtype = DType::kBF16;
    else if (t == "torch.HalfStorage") v->dtype = DType::kF16;
    else return fail(fmt::format("persistent id storage type '{}' is not a Float/BFloat16/Half storage", t));
    v->s = it[2]->s;
    v->numel = it[4]->i;
    if (v->numel < 0) return fail(fmt::format("storage '{}' has a negative size {}", v->s, v->numel));
    if (v->s.empty() || v->s.find('/') != std::string::npos || v->s.find("..") != std::string::npos) {
      return fail(fmt::format("storage key '{}' is not a plain name", v->s));
    }
    push(v);
    return {};
  }
  Result<std::vector<std::int64_t>> int_tuple(const VPtr& v, const char* what) {
    if (v->kind != Value::Kind::kTuple) return fail(fmt::format("_rebuild_tensor_v2: {} is a {}, expected a tuple of ints", what, kind_name(v->kind)));
    std::vector<std::int64_t> out;
    for (const auto& x : v->items) {
      if (x->kind != Value::Kind::kInt || x->i < 0) return fail(fmt::format("_rebuild_tensor_v2: {} holds a non-integer or negative value", what));
      out.push_back(x->i);
    }
    return out;
  }
  Status op_reduce() {
    MAMBA_ASSIGN_OR_RETURN(VPtr args, pop());
    MAMBA_ASSIGN_OR_RETURN(VPtr fn, pop());
    if (fn->kind != Value::Kind::kGlobal) return fail(fmt::format("REDUCE on a {} (expected an allowed global)", kind_name(fn->kind)));
    if (args->kind != Value::Kind::kTuple) return fail(fmt::format("REDUCE of {} with a {} (expected an argument tuple)", fn->s, kind_name(args->kind)));
    const auto& a = args->items;
    if (fn->s == "collections.OrderedDict") {
      if (!a.empty()) return fail("collections.OrderedDict called with arguments (expected none)");
      push(make(Value::Kind::kDict));
      return {};
    }
    if (fn->s == "torch._utils._rebuild_parameter") {
      if (a.empty() || a[0]->kind != Value::Kind::kTensor) return fail("_rebuild_parameter: first argument is not a tensor");
      push(a[0]);
      return {};
    }
    if (fn->s != "torch._utils._rebuild_tensor_v2") return fail(fmt::format("{} cannot be called", fn->s));
    if (a.size() < 4 || a[0]->kind != Value::Kind::kStorage || a[1]->kind != Value::Kind::kInt) {
      return fail("_rebuild_tensor_v2 expects (storage, storage_offset, size, stride, ...)");
    }
    MAMBA_ASSIGN_OR_RETURN(auto size, int_tuple(a[2], "size"));
    MAMBA_ASSIGN_OR_RETURN(auto stride, int_tuple(a[3], "stride"));
    if (size.size() != stride.size()) return fail(fmt::format("_rebuild_tensor_v2: size has {} dims but stride has {}", size.size(), stride.size()));
    if (size.size() > static_cast<std::size_t>(kMaxDims)) {
      return make_error(ErrorCode::kUnsupported, fmt::format("{}: pickle byte {}: tensor of rank {} (maximum {})", src_, op_pos_, size.size(), kMaxDims));
    }
    auto v = make(Value::Kind::kTensor);
    v->storage = a[0];
    v->dtype = a[0]->dtype;
    v->offset = a[1]->i;
    if (v->offset < 0) return fail(fmt::format("_rebuild_tensor_v2: negative storage offset {}", v->offset));
    // numel: elements of the tensor; span: storage elements it reaches (numel when contiguous). A
    // strided view is refused where the state dict names it (the key is not known here).
    std::int64_t numel = 1, expect_stride = 1, span = 1;
    for (std::size_t i = size.size(); i-- > 0;) {
      if (size[i] < 0 || stride[i] < 0) return fail("_rebuild_tensor_v2: negative size or stride");
      if (size[i] != 1 && stride[i] != expect_stride && v->non_contiguous.empty())
        v->non_contiguous = fmt::format("size ({}), stride ({})", fmt::join(size, ", "), fmt::join(stride, ", "));
      std::int64_t reach = 0;
      if (!checked_mul(expect_stride, size[i], &expect_stride) || !checked_mul(numel, size[i], &numel) ||
          !checked_mul(size[i] > 0 ? size[i] - 1 : 0, stride[i], &reach) || !checked_add(span, reach, &span)) {
        return fail("_rebuild_tensor_v2: size overflows");
      }
    }
    if (numel == 0) span = 0;
    numel = std::max(numel, span);
    for (std::size_t i = 0; i < size.size(); ++i) v->shape.dims[i] = size[i];
    v->shape.rank = static_cast<int>(size.size());
    std::int64_t end = 0;
    if (!checked_add(v->offset, numel, &end) || end > a[0]->numel) {
      return fail(fmt::format("_rebuild_tensor_v2: elements [{}, {}+{}) exceed storage '{}' of {} elements", v->offset, v->offset, numel,
                              a[0]->s, a[0]->numel));
    }
    push(v);
    return {};
  }

  const std::uint8_t* b_;
  std::size_t n_;
  std::string src_;
  std::size_t pos_ = 0, op_pos_ = 0;
  std::vector<VPtr> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, VPtr> memo_;
};

}  // namespace

Result<std::vector<TorchTensorRecord>> parse_torch_pickle(const std::uint8_t* bytes, std::size_t size, const std::string& source) {
  Unpickler u(bytes, size, source);
  MAMBA_ASSIGN_OR_RETURN(VPtr root, u.run());
  if (root->kind != Value::Kind::kDict) {
    return make_error(ErrorCode::kFormat, fmt::format("{}: the pickle holds a {}, expected a state dict", source, kind_name(root->kind)));
  }
  std::vector<TorchTensorRecord> out;
  std::unordered_map<std::string, DType> storage_dtype;
  for (const auto& [k, v] : root->dict) {
    if (k->kind != Value::Kind::kStr) return make_error(ErrorCode::kFormat, fmt::format("{}: state dict key is a {}, expected a string", source, kind_name(k->kind)));
    if (v->kind != Value::Kind::kTensor) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: state dict entry '{}' is a {}, expected a tensor", source, k->s, kind_name(v->kind)));
    }
    if (!v->non_contiguous.empty()) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: tensor '{}' is stored as a non-contiguous view ({}), which is not supported: save "
                                    "the state dict with contiguous tensors ({{k: v.contiguous() for k, v in sd.items()}})",
                                    source, k->s, v->non_contiguous));
    }
    auto [it, inserted] = storage_dtype.emplace(v->storage->s, v->dtype);
    if (!inserted && it->second != v->dtype) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: storage '{}' is used as both {} and {}", source, v->storage->s,
                                                        dtype_name(it->second), dtype_name(v->dtype)));
    }
    TorchTensorRecord r;
    r.name = k->s;
    r.storage_key = v->storage->s;
    r.dtype = v->dtype;
    r.storage_offset = v->offset;
    r.storage_numel = v->storage->numel;
    r.shape = v->shape;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace mamba::io
