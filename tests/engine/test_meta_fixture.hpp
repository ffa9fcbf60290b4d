#pragma once
// A tiny Meta checkpoint assembled in the tests without Strata's writers: the pickle opcode by opcode as torch.save
// emits it (pickletools' opcode table), the zip member by member (PKWARE APPNOTE), tokenizer.model line by line.
// So the readers are checked against encoders written independently of torch_zip::Writer and write_state_dict.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support.hpp"

namespace strata::test {

// Pickle opcodes, by hand.
struct PickleBytes {
    std::string b;
    void op(uint8_t o) { b.push_back(static_cast<char>(o)); }
    template <typename T>
    void le(T v) {
        char c[sizeof(T)];
        std::memcpy(c, &v, sizeof(T));
        b.append(c, sizeof(T));
    }
    void proto(uint8_t v) { op(0x80), op(v); }
    void unicode(const std::string& s) {  // BINUNICODE
        op('X'), le<uint32_t>(static_cast<uint32_t>(s.size()));
        b += s;
    }
    void short_unicode(const std::string& s) {  // SHORT_BINUNICODE
        op(0x8c), le<uint8_t>(static_cast<uint8_t>(s.size()));
        b += s;
    }
    void global(const std::string& module, const std::string& name) {
        op('c');
        b += module + "\n" + name + "\n";
    }
    void integer(int64_t v) {
        if (v >= 0 && v < 256) op('K'), le<uint8_t>(static_cast<uint8_t>(v));
        else if (v >= 0 && v < 65536) op('M'), le<uint16_t>(static_cast<uint16_t>(v));
        else op('J'), le<int32_t>(static_cast<int32_t>(v));
    }
    void long1(const std::vector<uint8_t>& bytes) {  // little-endian two's complement
        op(0x8a), le<uint8_t>(static_cast<uint8_t>(bytes.size()));
        for (uint8_t x : bytes) b.push_back(static_cast<char>(x));
    }
    void binput(uint8_t k) { op('q'), le<uint8_t>(k); }
    void binget(uint8_t k) { op('h'), le<uint8_t>(k); }
    void long_binput(uint32_t k) { op('r'), le<uint32_t>(k); }
    void long_binget(uint32_t k) { op('j'), le<uint32_t>(k); }
    void binfloat(double d) {  // big-endian
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        op('G');
        for (int k = 7; k >= 0; --k) b.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));
    }
};

struct MetaTensor {
    std::string name;            // "tok_embeddings.weight"
    std::vector<int64_t> shape;
    std::string storage_key;     // tensors may share a storage
    int64_t storage_offset = 0;  // in elements
};

// The state dict pickle as torch.save writes it for model.state_dict(): an OrderedDict built by REDUCE, items by
// SETITEMS, then BUILD with the `_metadata` attribute; globals memoized and fetched again with BINGET.
// `storage_numel(key)` gives the persistent id's element count; storages are torch.FloatStorage.
template <typename NumelFn>
std::string meta_pickle(const std::vector<MetaTensor>& tensors, NumelFn storage_numel,
                        const std::string& storage_class = "FloatStorage") {
    PickleBytes p;
    p.proto(2);
    p.global("collections", "OrderedDict");
    p.binput(0);
    p.op(')');  // EMPTY_TUPLE
    p.op('R');  // REDUCE -> OrderedDict()
    p.binput(1);
    p.op('(');  // MARK
    bool first = true;
    uint8_t next_memo = 4;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const MetaTensor& t = tensors[i];
        if (i % 2) p.unicode(t.name);
        else p.short_unicode(t.name);
        p.binput(next_memo++);
        if (first) {
            p.global("torch._utils", "_rebuild_tensor_v2");
            p.binput(2);
        } else {
            p.binget(2);
        }
        p.op('(');  // MARK: the arguments
        p.op('(');  // MARK: the persistent id
        p.short_unicode("storage");
        if (first) {
            p.global("torch", storage_class);
            p.binput(3);
        } else {
            p.binget(3);
        }
        p.unicode(t.storage_key);
        p.short_unicode("cpu");
        p.integer(storage_numel(t.storage_key));
        p.op('t');  // TUPLE
        p.binput(next_memo++);
        p.op('Q');  // BINPERSID
        p.integer(t.storage_offset);
        // size and stride tuples: TUPLE1 / TUPLE2; the first dimension of matrices as LONG1 for variety
        std::vector<int64_t> stride(t.shape.size());
        int64_t acc = 1;
        for (size_t k = t.shape.size(); k-- > 0;) stride[k] = acc, acc *= t.shape[k];
        for (const std::vector<int64_t>* v : {&t.shape, static_cast<const std::vector<int64_t>*>(&stride)}) {
            for (size_t k = 0; k < v->size(); ++k) {
                if (k == 0 && v->size() == 2 && (*v)[0] < 128) p.long1({static_cast<uint8_t>((*v)[0])});
                else p.integer((*v)[k]);
            }
            p.op(v->size() == 1 ? 0x85 : 0x86);  // TUPLE1 / TUPLE2
        }
        p.op(0x89);  // NEWFALSE: requires_grad
        p.binget(0);  // OrderedDict
        p.op(')');
        p.op('R');  // backward_hooks = OrderedDict()
        p.op('t');  // TUPLE of the arguments
        p.op('R');  // _rebuild_tensor_v2(...)
        p.binput(next_memo++);
        first = false;
    }
    p.op('u');  // SETITEMS
    // state: {'_metadata': OrderedDict({'': {'version': 1, 'extra': [None, 1.5, True, -2], 'self': <state>}})},
    // applied by BUILD. 'self' makes a reference cycle through the memo, which the reader must survive.
    p.op('}');  // EMPTY_DICT: the state
    p.long_binput(1000);
    p.short_unicode("_metadata");
    p.binget(0);
    p.op(')');
    p.op('R');  // OrderedDict()
    p.op('(');
    p.short_unicode("");
    p.op('}');
    p.short_unicode("version");
    p.integer(1);
    p.op('s');  // SETITEM
    p.short_unicode("extra");
    p.op(']');  // EMPTY_LIST
    p.op('(');
    p.op('N');  // NONE
    p.binfloat(1.5);
    p.op(0x88);       // NEWTRUE
    p.long1({0xfe});  // -2
    p.op('e');        // APPENDS
    p.op('s');
    p.short_unicode("self");
    p.long_binget(1000);
    p.op('s');
    p.op('u');  // SETITEMS into the OrderedDict
    p.op('s');  // SETITEM '_metadata' into the state
    p.op('b');  // BUILD
    p.op('.');  // STOP
    return p.b;
}

inline uint32_t crc32_bitwise(const std::string& s) {
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char ch : s) {
        c ^= ch;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

struct ZipMember {
    std::string name;
    std::string data;
    uint16_t method = 0;  // 0 stored; 8 claims deflate
};

// A plain (non-Zip64) archive, data aligned to 64 bytes like torch's.
inline std::string build_zip(const std::vector<ZipMember>& members) {
    PickleBytes o;  // used only as a little-endian byte sink
    std::vector<uint32_t> offsets;
    for (const ZipMember& m : members) {
        offsets.push_back(static_cast<uint32_t>(o.b.size()));
        const size_t base = o.b.size() + 30 + m.name.size() + 4;
        const size_t pad = (64 - base % 64) % 64;
        o.le<uint32_t>(0x04034b50), o.le<uint16_t>(20), o.le<uint16_t>(0), o.le<uint16_t>(m.method);
        o.le<uint16_t>(0), o.le<uint16_t>(0x21), o.le<uint32_t>(crc32_bitwise(m.data));
        o.le<uint32_t>(static_cast<uint32_t>(m.data.size())), o.le<uint32_t>(static_cast<uint32_t>(m.data.size()));
        o.le<uint16_t>(static_cast<uint16_t>(m.name.size())), o.le<uint16_t>(static_cast<uint16_t>(4 + pad));
        o.b += m.name;
        o.le<uint16_t>(0x4246), o.le<uint16_t>(static_cast<uint16_t>(pad));
        o.b.append(pad, 'Z');
        o.b += m.data;
    }
    const uint32_t cd = static_cast<uint32_t>(o.b.size());
    for (size_t i = 0; i < members.size(); ++i) {
        const ZipMember& m = members[i];
        o.le<uint32_t>(0x02014b50), o.le<uint16_t>(20), o.le<uint16_t>(20), o.le<uint16_t>(0);
        o.le<uint16_t>(m.method), o.le<uint16_t>(0), o.le<uint16_t>(0x21), o.le<uint32_t>(crc32_bitwise(m.data));
        o.le<uint32_t>(static_cast<uint32_t>(m.data.size())), o.le<uint32_t>(static_cast<uint32_t>(m.data.size()));
        o.le<uint16_t>(static_cast<uint16_t>(m.name.size())), o.le<uint16_t>(0), o.le<uint16_t>(0);
        o.le<uint16_t>(0), o.le<uint16_t>(0), o.le<uint32_t>(0), o.le<uint32_t>(offsets[i]);
        o.b += m.name;
    }
    const uint32_t cd_size = static_cast<uint32_t>(o.b.size()) - cd;
    o.le<uint32_t>(0x06054b50), o.le<uint16_t>(0), o.le<uint16_t>(0);
    o.le<uint16_t>(static_cast<uint16_t>(members.size())), o.le<uint16_t>(static_cast<uint16_t>(members.size()));
    o.le<uint32_t>(cd_size), o.le<uint32_t>(cd), o.le<uint16_t>(0);
    return o.b;
}

}  // namespace strata::test
