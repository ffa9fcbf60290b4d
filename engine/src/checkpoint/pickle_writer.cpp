// Writing the protocol-2 pickle torch.save produces for a dict of tensors:
//   {name: _rebuild_tensor_v2(persistent_load(('storage', <type>, key, 'cpu', numel)), 0, size, stride, False,
//                             OrderedDict())}
// Globals are memoized on first use and fetched with BINGET afterwards, as Python's pickler does.
#include <cstring>
#include <map>

#include "pickle.hpp"
#include "strata/error.hpp"

namespace strata::pickle {

namespace {

class Out {
public:
    std::string bytes;

    void op(uint8_t o) { bytes.push_back(static_cast<char>(o)); }
    void raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
    template <typename T>
    void le(T v) {
        raw(&v, sizeof v);
    }

    void str(const std::string& s) {
        op('X');  // BINUNICODE
        le<uint32_t>(static_cast<uint32_t>(s.size()));
        raw(s.data(), s.size());
    }

    // The smallest encoding Python's pickler would choose.
    void integer(int64_t v) {
        if (v >= 0 && v <= 0xff) {
            op('K');
            le<uint8_t>(static_cast<uint8_t>(v));
        } else if (v >= 0 && v <= 0xffff) {
            op('M');
            le<uint16_t>(static_cast<uint16_t>(v));
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            op('J');
            le<int32_t>(static_cast<int32_t>(v));
        } else {
            // LONG1: little-endian two's complement, as few bytes as keep the sign.
            uint8_t buf[8];
            std::memcpy(buf, &v, 8);
            int n = 8;
            while (n > 1 && ((buf[n - 1] == 0 && !(buf[n - 2] & 0x80)) || (buf[n - 1] == 0xff && (buf[n - 2] & 0x80))))
                --n;
            op(0x8a);
            le<uint8_t>(static_cast<uint8_t>(n));
            raw(buf, static_cast<size_t>(n));
        }
    }

    void int_tuple(const std::vector<int64_t>& v) {
        if (v.empty()) {
            op(')');
            return;
        }
        if (v.size() > 3) op('(');
        for (int64_t x : v) integer(x);
        op(v.size() == 1 ? 0x85 : v.size() == 2 ? 0x86 : v.size() == 3 ? 0x87 : 't');
    }

    // GLOBAL once, then BINGET of its memo slot.
    void global(const std::string& module, const std::string& name) {
        const std::string key = module + "\n" + name + "\n";
        auto it = memo_.find(key);
        if (it != memo_.end()) {
            get(it->second);
            return;
        }
        op('c');
        raw(key.data(), key.size());
        memo_[key] = put();
    }

    uint32_t put() {
        const uint32_t slot = next_++;
        if (slot < 256) {
            op('q');
            le<uint8_t>(static_cast<uint8_t>(slot));
        } else {
            op('r');
            le<uint32_t>(slot);
        }
        return slot;
    }

    void get(uint32_t slot) {
        if (slot < 256) {
            op('h');
            le<uint8_t>(static_cast<uint8_t>(slot));
        } else {
            op('j');
            le<uint32_t>(slot);
        }
    }

private:
    std::map<std::string, uint32_t> memo_;
    uint32_t next_ = 0;
};

const char* storage_class(DType t) {
    switch (t) {
        case DType::BF16: return "BFloat16Storage";
        case DType::F16: return "HalfStorage";
        case DType::F32: return "FloatStorage";
        default: throw UnsupportedError("a .pth cannot hold " + std::string(dtype_name(t)) + " tensors");
    }
}

}  // namespace

std::string write_state_dict(const std::vector<WriteTensor>& tensors) {
    Out o;
    o.op(0x80);  // PROTO 2
    o.op(2);
    o.op('}');  // EMPTY_DICT
    o.put();
    if (!tensors.empty()) o.op('(');  // MARK for SETITEMS
    for (const WriteTensor& t : tensors) {
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        o.str(t.name);
        o.put();
        o.global("torch._utils", "_rebuild_tensor_v2");
        o.op('(');  // arguments of _rebuild_tensor_v2
        o.op('(');  // the persistent id tuple
        o.str("storage");
        o.global("torch", storage_class(t.dtype));
        o.str(t.storage_key);
        o.str("cpu");
        o.integer(numel);
        o.op('t');
        o.put();
        o.op('Q');  // BINPERSID
        o.integer(0);
        o.int_tuple(t.shape);
        o.int_tuple(contiguous_strides(t.shape));
        o.op(0x89);  // NEWFALSE: requires_grad
        o.global("collections", "OrderedDict");
        o.op(')');
        o.op('R');  // OrderedDict(): backward hooks
        o.put();
        o.op('t');
        o.put();
        o.op('R');  // _rebuild_tensor_v2(...)
        o.put();
    }
    if (!tensors.empty()) o.op('u');  // SETITEMS
    o.op('.');
    return std::move(o.bytes);
}

}  // namespace strata::pickle
