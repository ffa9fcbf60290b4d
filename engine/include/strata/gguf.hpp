#pragma once
// The GGUF container (ggml's docs/gguf.md, versions 2 and 3), independent of what model it holds:
//   header      "GGUF", version, tensor count, metadata count
//   metadata    key (string), value type, value (scalars, strings, arrays of them)
//   tensor info name, dims (ne[0] is the fastest axis), ggml type, offset relative to the data section
//   data        starts at the first multiple of general.alignment (default 32) after the tensor infos
// `parse` reads the first three and checks every tensor's bytes lie inside the file; `Writer` writes the whole
// thing. load_gguf (Llama 3 semantics) and write_gguf / `quantize` stand on these.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/dtype.hpp"

namespace strata::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;

enum class ValueType : uint32_t {
    Uint8 = 0,
    Int8 = 1,
    Uint16 = 2,
    Int16 = 3,
    Uint32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    Uint64 = 10,
    Int64 = 11,
    Float64 = 12,
};
std::string_view value_type_name(ValueType t);  // "uint32", "string", "array", ... ("?" when unknown)

// One metadata value. Scalars live in the field matching their kind; arrays keep their element type in `elem`
// and their elements in `ints` (every integer type and bool), `floats`, `strings` or `items` (arrays of arrays).
struct Value {
    ValueType type = ValueType::Uint32;
    ValueType elem = ValueType::Uint8;  // arrays only
    uint64_t u = 0;      // Uint8..Uint64 and Bool
    int64_t i = 0;       // Int8..Int64
    double f = 0.0;      // Float32, Float64
    std::string str;     // String
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    std::vector<Value> items;

    bool is_integer() const;
    bool is_float() const { return type == ValueType::Float32 || type == ValueType::Float64; }
    uint64_t array_size() const;

    // Builders for writers.
    static Value u32(uint32_t v);
    static Value i32(int32_t v);
    static Value u64(uint64_t v);
    static Value f32(float v);
    static Value boolean(bool v);
    static Value string(std::string v);
    static Value string_array(std::vector<std::string> v);
    static Value int_array(ValueType elem, std::vector<int64_t> v);     // elem: an integer type or Bool
    static Value float_array(ValueType elem, std::vector<double> v);    // elem: Float32 or Float64
};

// A ggml tensor type as GGUF numbers it. Every type ggml has defined is known by name and block layout, so an
// unsupported one can be named in an error; `dtype` is set for the ones Strata can represent.
struct TypeInfo {
    uint32_t id = 0;
    std::string_view name;    // "F32", "Q4_K", ...
    int64_t block_size = 1;   // elements per block
    int64_t block_bytes = 4;  // bytes per block
    std::optional<DType> dtype;
};
// nullptr for an id ggml never defined (or removed: 4, 5, 31..33, 36..38).
const TypeInfo* type_info(uint32_t ggml_type);
// The GGUF type id of a Strata dtype.
uint32_t type_id(DType t);

struct TensorInfo {
    std::string name;
    std::vector<uint64_t> ne;  // ne[0] is the fastest-varying axis (reverse of torch order)
    uint32_t type = 0;
    uint64_t offset = 0;       // relative to the data section, as stored
    uint64_t file_offset = 0;  // absolute offset in the file
    uint64_t nbytes = 0;       // bytes of the tensor's data
    uint64_t numel() const;
    std::vector<int64_t> torch_shape() const;  // ne reversed: [ne1, ne0] for a matrix
};

struct File {
    uint32_t version = 3;
    uint64_t alignment = kDefaultAlignment;
    uint64_t data_offset = 0;  // absolute start of the data section
    std::vector<std::pair<std::string, Value>> metadata;  // in file order
    std::vector<TensorInfo> tensors;                      // in file order

    const Value* find(std::string_view key) const;
    const TensorInfo* find_tensor(std::string_view name) const;
};

// Parses header, metadata and tensor infos of a GGUF image held in memory. Checks before allocating (counts and
// string lengths against the bytes left), known value/tensor types, alignment of every tensor offset, that every
// tensor's bytes lie inside `bytes` and that no two tensors overlap. Unknown ggml type ids are FormatErrors;
// known-but-unsupported ones are kept (the caller decides). Every error names `file_name` and the offset.
File parse(std::span<const std::byte> bytes, const std::string& file_name);

// Writes a GGUF v3 file: metadata in insertion order, then tensor infos, then each tensor's bytes at the next
// multiple of the alignment. Tensor bytes come from a callback so a large model streams straight to disk.
class Writer {
public:
    explicit Writer(uint64_t alignment = kDefaultAlignment);

    void set(std::string key, Value v);  // replaces an existing key
    // `write_data` must write exactly `nbytes` bytes to the stream (checked).
    void add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type, uint64_t nbytes,
                    std::function<void(std::ostream&)> write_data);
    // Throws Error naming `out` when the file cannot be written.
    void write(const std::filesystem::path& out) const;

private:
    struct PendingTensor {
        std::string name;
        std::vector<uint64_t> ne;
        uint32_t type;
        uint64_t nbytes;
        std::function<void(std::ostream&)> write_data;
    };
    uint64_t alignment_;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace strata::gguf
