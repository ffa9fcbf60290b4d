#pragma once
// safetensors (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the data.
// Parsing is strict: every offset, size and shape is checked against the file before a view is made, and only
// the header is read, so weights stay untouched pages of the map.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "strata/dtype.hpp"

namespace strata::safetensors {

struct Entry {
    std::string name;            // as stored: "model.layers.0.self_attn.q_proj.weight"
    DType dtype = DType::F32;
    std::vector<int64_t> shape;  // torch order
    uint64_t offset = 0;         // absolute byte offset of the data inside the file (header included)
    uint64_t nbytes = 0;
};

struct Header {
    std::vector<Entry> tensors;                   // in file order (by offset)
    std::map<std::string, std::string> metadata;  // "__metadata__", e.g. {"format": "pt"}
    uint64_t data_start = 0;                      // 8 + header length
};

// Parses and validates the header of a whole safetensors file held in `bytes`. `file` names it in errors.
// Throws FormatError (truncated, lying header, bad offsets/shapes, overlaps) or UnsupportedError (a dtype other
// than BF16/F16/F32, naming the tensor).
Header parse(std::span<const std::byte> bytes, const std::string& file);

// A tensor to write: raw little-endian bytes of `dtype` with `shape`.
struct WriteTensor {
    std::string name;
    DType dtype = DType::BF16;
    std::vector<int64_t> shape;
    std::span<const std::byte> data;
};

// Writes a safetensors file (header padded with spaces to 8-byte alignment, tensors in the given order).
// Throws Error when the file cannot be written or a tensor's byte count does not match its shape.
void write(const std::string& file, const std::vector<WriteTensor>& tensors,
           const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace strata::safetensors
