// GGUF's value types and ggml's tensor types: names, block layouts, and the Value builders.
#include <array>

#include "strata/error.hpp"
#include "strata/gguf.hpp"

namespace strata::gguf {

namespace {

// Every tensor type ggml has numbered (ggml.h, enum ggml_type) with its block layout, so a file with a type
// Strata cannot run yet still gets a precise message and a correct size check. Removed ids (4, 5: Q4_2/Q4_3;
// 31-33 and 36-38: repacked variants that are never stored in files) are absent and read as unknown.
constexpr std::array kTypes = {
    TypeInfo{0, "F32", 1, 4, DType::F32},
    TypeInfo{1, "F16", 1, 2, DType::F16},
    TypeInfo{2, "Q4_0", 32, 18, DType::Q4_0},
    TypeInfo{3, "Q4_1", 32, 20, std::nullopt},
    TypeInfo{6, "Q5_0", 32, 22, std::nullopt},
    TypeInfo{7, "Q5_1", 32, 24, std::nullopt},
    TypeInfo{8, "Q8_0", 32, 34, DType::Q8_0},
    TypeInfo{9, "Q8_1", 32, 36, std::nullopt},
    TypeInfo{10, "Q2_K", 256, 84, std::nullopt},
    TypeInfo{11, "Q3_K", 256, 110, std::nullopt},
    TypeInfo{12, "Q4_K", 256, 144, DType::Q4_K},
    TypeInfo{13, "Q5_K", 256, 176, DType::Q5_K},
    TypeInfo{14, "Q6_K", 256, 210, DType::Q6_K},
    TypeInfo{15, "Q8_K", 256, 292, std::nullopt},
    TypeInfo{16, "IQ2_XXS", 256, 66, std::nullopt},
    TypeInfo{17, "IQ2_XS", 256, 74, std::nullopt},
    TypeInfo{18, "IQ3_XXS", 256, 98, std::nullopt},
    TypeInfo{19, "IQ1_S", 256, 50, std::nullopt},
    TypeInfo{20, "IQ4_NL", 32, 18, std::nullopt},
    TypeInfo{21, "IQ3_S", 256, 110, std::nullopt},
    TypeInfo{22, "IQ2_S", 256, 82, std::nullopt},
    TypeInfo{23, "IQ4_XS", 256, 136, std::nullopt},
    TypeInfo{24, "I8", 1, 1, std::nullopt},
    TypeInfo{25, "I16", 1, 2, std::nullopt},
    TypeInfo{26, "I32", 1, 4, std::nullopt},
    TypeInfo{27, "I64", 1, 8, std::nullopt},
    TypeInfo{28, "F64", 1, 8, std::nullopt},
    TypeInfo{29, "IQ1_M", 256, 56, std::nullopt},
    TypeInfo{30, "BF16", 1, 2, DType::BF16},
    TypeInfo{34, "TQ1_0", 256, 54, std::nullopt},
    TypeInfo{35, "TQ2_0", 256, 66, std::nullopt},
    TypeInfo{39, "MXFP4", 32, 17, std::nullopt},
};

}  // namespace

const TypeInfo* type_info(uint32_t ggml_type) {
    for (const TypeInfo& t : kTypes)
        if (t.id == ggml_type) return &t;
    return nullptr;
}

uint32_t type_id(DType t) {
    for (const TypeInfo& info : kTypes)
        if (info.dtype == t) return info.id;
    throw UnsupportedError("GGUF has no type for " + std::string(dtype_name(t)));
}

std::string_view value_type_name(ValueType t) {
    switch (t) {
        case ValueType::Uint8: return "uint8";
        case ValueType::Int8: return "int8";
        case ValueType::Uint16: return "uint16";
        case ValueType::Int16: return "int16";
        case ValueType::Uint32: return "uint32";
        case ValueType::Int32: return "int32";
        case ValueType::Float32: return "float32";
        case ValueType::Bool: return "bool";
        case ValueType::String: return "string";
        case ValueType::Array: return "array";
        case ValueType::Uint64: return "uint64";
        case ValueType::Int64: return "int64";
        case ValueType::Float64: return "float64";
    }
    return "?";
}

bool Value::is_integer() const {
    switch (type) {
        case ValueType::Uint8:
        case ValueType::Int8:
        case ValueType::Uint16:
        case ValueType::Int16:
        case ValueType::Uint32:
        case ValueType::Int32:
        case ValueType::Uint64:
        case ValueType::Int64: return true;
        default: return false;
    }
}

uint64_t Value::array_size() const {
    if (type != ValueType::Array) return 0;
    return ints.size() + floats.size() + strings.size() + items.size();
}

Value Value::u32(uint32_t v) {
    Value x;
    x.type = ValueType::Uint32;
    x.u = v;
    return x;
}

Value Value::i32(int32_t v) {
    Value x;
    x.type = ValueType::Int32;
    x.i = v;
    return x;
}

Value Value::u64(uint64_t v) {
    Value x;
    x.type = ValueType::Uint64;
    x.u = v;
    return x;
}

Value Value::f32(float v) {
    Value x;
    x.type = ValueType::Float32;
    x.f = v;
    return x;
}

Value Value::boolean(bool v) {
    Value x;
    x.type = ValueType::Bool;
    x.u = v ? 1 : 0;
    return x;
}

Value Value::string(std::string v) {
    Value x;
    x.type = ValueType::String;
    x.str = std::move(v);
    return x;
}

Value Value::string_array(std::vector<std::string> v) {
    Value x;
    x.type = ValueType::Array;
    x.elem = ValueType::String;
    x.strings = std::move(v);
    return x;
}

Value Value::int_array(ValueType elem, std::vector<int64_t> v) {
    Value x;
    x.type = ValueType::Array;
    x.elem = elem;
    x.ints = std::move(v);
    return x;
}

Value Value::float_array(ValueType elem, std::vector<double> v) {
    Value x;
    x.type = ValueType::Array;
    x.elem = elem;
    x.floats = std::move(v);
    return x;
}

uint64_t TensorInfo::numel() const {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    return n;
}

std::vector<int64_t> TensorInfo::torch_shape() const {
    return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

const Value* File::find(std::string_view key) const {
    for (const auto& [k, v] : metadata)
        if (k == key) return &v;
    return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    for (const TensorInfo& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

}  // namespace strata::gguf
