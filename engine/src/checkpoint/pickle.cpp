// The pickle reader: a stack machine over the opcodes torch.save emits for a state dict.
//
// Objects live in one arena and the stack, memo and containers hold indices into it. A hostile pickle can make a
// list contain itself through the memo; with indices that is just a number, never a reference cycle, a leak or a
// deep recursive destructor. The memo lets one object be named any number of times, so nothing is copied out of
// an object whose size the file controls: storages and tensors refer to their records by index, the strings
// they keep are short (checked before copying), and the counts of objects, records and dict entries are capped
// at far more than any state dict needs. Memory is then bounded by a small multiple of the (capped) input.
#include <bit>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "pickle.hpp"
#include "strata/error.hpp"

namespace strata::pickle {

namespace {

// Opcode bytes (pickletools.py).
enum Op : uint8_t {
    MARK = '(',
    STOP = '.',
    BINFLOAT = 'G',
    BININT = 'J',
    BININT1 = 'K',
    BININT2 = 'M',
    NONE = 'N',
    BINPERSID = 'Q',
    REDUCE = 'R',
    BINUNICODE = 'X',
    EMPTY_LIST = ']',
    APPEND = 'a',
    BUILD = 'b',
    GLOBAL = 'c',
    APPENDS = 'e',
    BINGET = 'h',
    LONG_BINGET = 'j',
    BINPUT = 'q',
    LONG_BINPUT = 'r',
    SETITEM = 's',
    TUPLE = 't',
    SETITEMS = 'u',
    EMPTY_DICT = '}',
    EMPTY_TUPLE = ')',
    PROTO = 0x80,
    NEWTRUE = 0x88,
    NEWFALSE = 0x89,
    LONG1 = 0x8a,
    TUPLE1 = 0x85,
    TUPLE2 = 0x86,
    TUPLE3 = 0x87,
    SHORT_BINUNICODE = 0x8c,
};

// Limits, each far beyond a real state dict (Llama 3 8B: a 40 KB pickle of ~5,000 objects and 291 tensors; a
// 405B shard a few hundred KB).
constexpr size_t kMaxObjects = size_t(1) << 20;  // objects of any kind
constexpr size_t kMaxRecords = size_t(1) << 16;  // storages, tensors, state dict entries
constexpr size_t kMaxName = 1024;                // a state dict key
constexpr size_t kMaxKey = 256;                  // a storage key or location
constexpr size_t kMaxRank = 8;                   // dimensions of a tensor

enum class Kind : uint8_t { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Tuple: return "tuple";
        case Kind::List: return "list";
        case Kind::Dict: return "dict";
        case Kind::Global: return "global";
        case Kind::Storage: return "storage";
        case Kind::Tensor: return "tensor";
    }
    return "?";
}

struct Obj {
    explicit Obj(Kind k) : kind(k) {}
    Kind kind;
    int64_t i = 0;               // Int, Bool; Storage/Tensor: index into the machine's records
    double f = 0;
    std::string s;               // String; Global: "module name"
    std::vector<uint32_t> items; // Tuple, List; Dict: key, value, key, value, ...
};

class Machine {
public:
    Machine(std::span<const std::byte> bytes, const std::string& file) : b_(bytes), file_(file) {}

    std::vector<Tensor> run() {
        for (;;) {
            op_at_ = pos_;
            const uint8_t op = u8();
            switch (op) {
                case PROTO: {
                    const uint8_t v = u8();
                    if (v > 5) fail("pickle protocol " + std::to_string(v) + " is newer than any Python writes");
                    break;
                }
                case EMPTY_DICT: push(make(Kind::Dict)); break;
                case EMPTY_LIST: push(make(Kind::List)); break;
                case EMPTY_TUPLE: push(make(Kind::Tuple)); break;
                case MARK: marks_.push_back(stack_.size()); break;
                case BINUNICODE: push(string(u32())); break;
                case SHORT_BINUNICODE: push(string(u8())); break;
                case BININT: push(integer(static_cast<int32_t>(u32()))); break;
                case BININT1: push(integer(u8())); break;
                case BININT2: push(integer(u16())); break;
                case LONG1: push(integer(long1())); break;
                case BINFLOAT: {
                    uint64_t bits = 0;
                    for (int k = 0; k < 8; ++k) bits = (bits << 8) | u8();  // big-endian
                    Obj o{Kind::Float};
                    o.f = std::bit_cast<double>(bits);
                    push(make(std::move(o)));
                    break;
                }
                case NONE: push(make(Kind::None)); break;
                case NEWTRUE:
                case NEWFALSE: {
                    Obj o{Kind::Bool};
                    o.i = op == NEWTRUE;
                    push(make(std::move(o)));
                    break;
                }
                case TUPLE: {
                    const size_t m = pop_mark();
                    push(tuple(m));
                    break;
                }
                case TUPLE1:
                case TUPLE2:
                case TUPLE3: {
                    const size_t n = op - TUPLE1 + 1;
                    if (stack_.size() < floor() + n) underflow();
                    push(tuple(stack_.size() - n));
                    break;
                }
                case SETITEM: {
                    const uint32_t v = pop(), k = pop();
                    Obj& d = top_of(Kind::Dict, "SETITEM");
                    d.items.push_back(k);
                    d.items.push_back(v);
                    break;
                }
                case SETITEMS: {
                    const size_t m = pop_mark();
                    if ((stack_.size() - m) % 2 != 0) fail("SETITEMS with an odd number of items");
                    if (m == 0 || m <= floor()) underflow();
                    Obj& d = obj_of(stack_[m - 1], Kind::Dict, "SETITEMS");
                    d.items.insert(d.items.end(), stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
                    stack_.resize(m);
                    break;
                }
                case APPEND: {
                    const uint32_t v = pop();
                    top_of(Kind::List, "APPEND").items.push_back(v);
                    break;
                }
                case APPENDS: {
                    const size_t m = pop_mark();
                    if (m == 0 || m <= floor()) underflow();
                    Obj& l = obj_of(stack_[m - 1], Kind::List, "APPENDS");
                    l.items.insert(l.items.end(), stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
                    stack_.resize(m);
                    break;
                }
                case GLOBAL: {
                    std::string module = line(), name = line();
                    Obj o{Kind::Global};
                    o.s = module + " " + name;
                    check_global(o.s);
                    push(make(std::move(o)));
                    break;
                }
                case BINPERSID: push(persistent(pop())); break;
                case REDUCE: {
                    const uint32_t args = pop(), callable = pop();
                    push(reduce(callable, args));
                    break;
                }
                case BUILD: {
                    // torch's OrderedDict state dicts carry a `_metadata` attribute (module versions) set by BUILD;
                    // it does not describe any weight, so the state is dropped.
                    pop();
                    if (stack_.size() <= floor()) underflow();
                    break;
                }
                case BINPUT: put(u8()); break;
                case LONG_BINPUT: put(u32()); break;
                case BINGET: get(u8()); break;
                case LONG_BINGET: get(u32()); break;
                case STOP: return result(pop());
                default: {
                    char hex[8];
                    std::snprintf(hex, sizeof hex, "0x%02x", op);
                    throw FormatError("unexpected pickle opcode " + std::string(hex) + " at offset " +
                                      std::to_string(op_at_) + " in " + file_ +
                                      " (Strata reads the subset torch.save writes for a state dict)");
                }
            }
        }
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw FormatError(file_ + ": " + what + " (pickle opcode at offset " + std::to_string(op_at_) + ")");
    }
    [[noreturn]] void underflow() const { fail("pickle stack underflow"); }

    // ---- input ----
    void need(uint64_t n) const {
        if (n > b_.size() - pos_)
            throw FormatError(file_ + ": truncated pickle: the opcode at offset " + std::to_string(op_at_) +
                              " needs " + std::to_string(n) + " more bytes, " + std::to_string(b_.size() - pos_) +
                              " remain (no STOP)");
    }
    uint8_t u8() {
        need(1);
        return static_cast<uint8_t>(b_[pos_++]);
    }
    uint16_t u16() {
        need(2);
        uint16_t v;
        std::memcpy(&v, b_.data() + pos_, 2);
        pos_ += 2;
        return v;
    }
    uint32_t u32() {
        need(4);
        uint32_t v;
        std::memcpy(&v, b_.data() + pos_, 4);
        pos_ += 4;
        return v;
    }
    int64_t long1() {
        const uint8_t n = u8();
        if (n > 8) fail("integer of " + std::to_string(n) + " bytes is too large for a tensor size or offset");
        need(n);
        uint64_t v = 0;
        for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(b_[pos_ + k]);
        // Two's complement: sign-extend from the top byte.
        if (n > 0 && n < 8 && (static_cast<uint8_t>(b_[pos_ + n - 1]) & 0x80)) v |= ~uint64_t(0) << (8 * n);
        pos_ += n;
        return static_cast<int64_t>(v);
    }
    std::string line() {
        const auto* start = reinterpret_cast<const char*>(b_.data() + pos_);
        const void* nl = std::memchr(start, '\n', b_.size() - pos_);
        if (!nl) need(b_.size() - pos_ + 1);  // reports the truncation
        const size_t n = static_cast<const char*>(nl) - start;
        pos_ += n + 1;
        return std::string(start, n);
    }

    // ---- objects ----
    uint32_t make(Obj o) {
        if (objs_.size() >= kMaxObjects)
            fail("more than " + std::to_string(kMaxObjects) + " objects: far beyond any state dict");
        objs_.push_back(std::move(o));
        return static_cast<uint32_t>(objs_.size() - 1);
    }
    uint32_t make(Kind k) { return make(Obj{k}); }
    uint32_t integer(int64_t v) {
        Obj o{Kind::Int};
        o.i = v;
        return make(std::move(o));
    }
    uint32_t string(uint64_t n) {
        need(n);
        Obj o{Kind::String};
        o.s.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return make(std::move(o));
    }
    uint32_t tuple(size_t from) {
        Obj o{Kind::Tuple};
        o.items.assign(stack_.begin() + static_cast<ptrdiff_t>(from), stack_.end());
        stack_.resize(from);
        return make(std::move(o));
    }

    // ---- stack ----
    size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    void push(uint32_t o) { stack_.push_back(o); }
    uint32_t pop() {
        if (stack_.size() <= floor()) underflow();
        const uint32_t o = stack_.back();
        stack_.pop_back();
        return o;
    }
    size_t pop_mark() {
        if (marks_.empty()) fail("no MARK before this opcode");
        const size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    Obj& obj_of(uint32_t o, Kind k, const char* op) {
        if (objs_[o].kind != k)
            fail(std::string(op) + " needs a " + kind_name(k) + " but found a " + kind_name(objs_[o].kind));
        return objs_[o];
    }
    Obj& top_of(Kind k, const char* op) {
        if (stack_.size() <= floor()) underflow();
        return obj_of(stack_.back(), k, op);
    }
    void put(uint32_t key) {
        if (stack_.empty()) underflow();
        if (memo_.size() >= kMaxObjects && !memo_.count(key))
            fail("more than " + std::to_string(kMaxObjects) + " memo entries: far beyond any state dict");
        memo_[key] = stack_.back();
    }
    void get(uint32_t key) {
        auto it = memo_.find(key);
        if (it == memo_.end()) fail("memo key " + std::to_string(key) + " was never stored");
        push(it->second);
    }

    // ---- torch ----
    void check_global(const std::string& g) const {
        static const std::unordered_set<std::string> kAllowed = {
            "collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch BFloat16Storage",
            "torch HalfStorage", "torch FloatStorage"};
        if (kAllowed.count(g)) return;
        if (g.rfind("torch ", 0) == 0 && g.ends_with("Storage"))
            throw UnsupportedError(file_ + ": tensors of type " + g.substr(6) +
                                   " are not supported (Strata reads bf16, f16 and f32 weights)");
        fail("unexpected global \"" + g + "\" (a state dict only needs collections.OrderedDict, "
             "torch._utils._rebuild_tensor_v2 and the typed storages)");
    }

    uint32_t persistent(uint32_t pid) {
        const Obj& t = obj_of(pid, Kind::Tuple, "BINPERSID");
        auto item = [&](size_t k, Kind kind) -> const Obj& {
            return obj_of(t.items[k], kind, "the persistent id ('storage', type, key, location, numel)");
        };
        if (t.items.size() != 5 || item(0, Kind::String).s != "storage")
            fail("persistent id is not ('storage', type, key, location, numel)");
        const std::string& type = item(1, Kind::Global).s;
        if (item(2, Kind::String).s.size() > kMaxKey || item(3, Kind::String).s.size() > kMaxKey)
            fail("a storage key or location longer than " + std::to_string(kMaxKey) + " bytes");
        if (storages_.size() >= kMaxRecords) fail("more than " + std::to_string(kMaxRecords) + " storages");
        Storage s;
        if (type == "torch BFloat16Storage") s.dtype = DType::BF16;
        else if (type == "torch HalfStorage") s.dtype = DType::F16;
        else if (type == "torch FloatStorage") s.dtype = DType::F32;
        else fail("persistent id names " + type + ", not a storage type");
        s.key = item(2, Kind::String).s;
        s.location = item(3, Kind::String).s;
        s.numel = item(4, Kind::Int).i;
        if (s.numel < 0) fail("storage " + s.key + " has negative size " + std::to_string(s.numel));
        Obj o{Kind::Storage};
        o.i = static_cast<int64_t>(storages_.size());
        storages_.push_back(std::move(s));
        return make(std::move(o));
    }

    std::vector<int64_t> int_tuple(uint32_t o, const char* what) {
        std::vector<int64_t> v;
        const std::vector<uint32_t>& items = obj_of(o, Kind::Tuple, what).items;
        if (items.size() > kMaxRank)
            fail(std::string(what) + " has " + std::to_string(items.size()) + " dimensions (at most " +
                 std::to_string(kMaxRank) + ")");
        for (uint32_t x : items) {
            const Obj& e = obj_of(x, Kind::Int, what);
            if (e.i < 0) fail(std::string(what) + " holds the negative value " + std::to_string(e.i));
            v.push_back(e.i);
        }
        return v;
    }

    uint32_t reduce(uint32_t callable, uint32_t args) {
        const std::string g = obj_of(callable, Kind::Global, "REDUCE").s;
        const std::vector<uint32_t>& args_items = obj_of(args, Kind::Tuple, "REDUCE").items;
        if (args_items.size() > 7)  // _rebuild_tensor_v2 takes at most 7; the copy below stays small
            fail(g + " called with " + std::to_string(args_items.size()) + " arguments");
        const std::vector<uint32_t> a = args_items;
        if (g == "collections OrderedDict") {
            if (!a.empty()) fail("OrderedDict called with arguments");
            return make(Kind::Dict);
        }
        if (g == "torch._utils _rebuild_tensor_v2") {
            // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
            if (a.size() < 4) fail("_rebuild_tensor_v2 called with " + std::to_string(a.size()) + " arguments");
            if (tensors_.size() >= kMaxRecords) fail("more than " + std::to_string(kMaxRecords) + " tensors");
            Record t;
            t.storage = static_cast<size_t>(obj_of(a[0], Kind::Storage, "_rebuild_tensor_v2 storage").i);
            t.storage_offset = obj_of(a[1], Kind::Int, "_rebuild_tensor_v2 storage_offset").i;
            if (t.storage_offset < 0) fail("negative storage offset " + std::to_string(t.storage_offset));
            t.shape = int_tuple(a[2], "_rebuild_tensor_v2 size");
            t.stride = int_tuple(a[3], "_rebuild_tensor_v2 stride");
            if (t.shape.size() != t.stride.size())
                fail("tensor size has " + std::to_string(t.shape.size()) + " dimensions but stride " +
                     std::to_string(t.stride.size()));
            Obj o{Kind::Tensor};
            o.i = static_cast<int64_t>(tensors_.size());
            tensors_.push_back(std::move(t));
            return make(std::move(o));
        }
        fail("cannot call " + g);
    }

    std::vector<Tensor> result(uint32_t root) {
        const Obj& d = objs_[root];
        if (d.kind != Kind::Dict)
            throw FormatError(file_ + ": the pickle holds a " + std::string(kind_name(d.kind)) +
                              ", not a state dict of tensors");
        std::vector<Tensor> out;
        std::unordered_set<std::string> names;
        if (d.items.size() / 2 > kMaxRecords)
            throw FormatError(file_ + ": a state dict of " + std::to_string(d.items.size() / 2) +
                              " entries is beyond any model's (at most " + std::to_string(kMaxRecords) + ")");
        for (size_t k = 0; k + 1 < d.items.size(); k += 2) {
            const Obj& key = objs_[d.items[k]];
            const Obj& value = objs_[d.items[k + 1]];
            if (key.kind != Kind::String)
                throw FormatError(file_ + ": state dict key " + std::to_string(k / 2) + " is a " +
                                  kind_name(key.kind) + ", not a name");
            if (key.s.size() > kMaxName)
                throw FormatError(file_ + ": state dict key " + std::to_string(k / 2) + " is " +
                                  std::to_string(key.s.size()) + " bytes long (at most " + std::to_string(kMaxName) + ")");
            if (value.kind != Kind::Tensor)
                throw FormatError(file_ + ": state dict entry " + key.s + " is a " + kind_name(value.kind) +
                                  ", not a tensor");
            if (!names.insert(key.s).second) throw FormatError(file_ + ": state dict key " + key.s + " appears twice");
            const Record& r = tensors_[static_cast<size_t>(value.i)];
            out.push_back(Tensor{key.s, storages_[r.storage], r.storage_offset, r.shape, r.stride});
        }
        return out;
    }

    std::span<const std::byte> b_;
    const std::string& file_;
    size_t pos_ = 0;
    size_t op_at_ = 0;
    std::vector<Obj> objs_;
    std::vector<uint32_t> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint32_t, uint32_t> memo_;
    // A _rebuild_tensor_v2 call: its storage by index (a storage named by many tensors is not copied).
    struct Record {
        size_t storage = 0;
        int64_t storage_offset = 0;
        std::vector<int64_t> shape, stride;
    };
    std::vector<Storage> storages_;
    std::vector<Record> tensors_;
};

}  // namespace

std::vector<Tensor> read_state_dict(std::span<const std::byte> bytes, const std::string& file) {
    // Each opcode can make an object of tens of bytes; a state dict pickle is kilobytes (a few hundred KB for the
    // largest models), so a huge one is refused before it can cost gigabytes.
    constexpr size_t kMaxPickle = size_t(16) << 20;
    if (bytes.size() > kMaxPickle)
        throw FormatError(file + ": a pickle of " + std::to_string(bytes.size()) +
                          " bytes is far larger than any state dict's (at most " + std::to_string(kMaxPickle) + ")");
    return Machine(bytes, file).run();
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(shape.size());
    int64_t acc = 1;
    for (size_t k = shape.size(); k-- > 0;) {
        s[k] = acc;
        acc *= shape[k];
    }
    return s;
}

}  // namespace strata::pickle
