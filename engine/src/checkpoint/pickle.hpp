#pragma once
// The pickle subset torch.save uses for a state dict (protocol 2; opcodes as Python's Lib/pickletools.py documents
// them). The reader is a small stack machine that never calls anything: the only "callables" it knows are
// collections.OrderedDict (a dict), torch._utils._rebuild_tensor_v2 (a tensor record) and the typed storages
// torch.BFloat16Storage / HalfStorage / FloatStorage named by persistent ids. Every other opcode or global is
// a FormatError naming the opcode and its offset.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/dtype.hpp"

namespace strata::pickle {

// A storage, as torch's persistent id ('storage', storage_type, key, location, numel) names it.
struct Storage {
    DType dtype = DType::F32;
    std::string key;       // the archive member <prefix>/data/<key> holds its bytes
    std::string location;  // "cpu", "cuda:0", ...
    int64_t numel = 0;     // in elements of dtype
};

// One tensor of the state dict: _rebuild_tensor_v2(storage, storage_offset, size, stride, ...).
struct Tensor {
    std::string name;            // the state-dict key: "layers.0.attention.wq.weight"
    Storage storage;
    int64_t storage_offset = 0;  // in elements
    std::vector<int64_t> shape;
    std::vector<int64_t> stride;
};

// Runs the pickle in `bytes` and returns the tensors of the dict it builds, in insertion order. `file` names the
// pickle in errors ("consolidated.00.pth:consolidated/data.pkl"). Throws FormatError (bad or unexpected opcode,
// truncation, wrong structure) or UnsupportedError (a storage type other than bf16/f16/f32).
std::vector<Tensor> read_state_dict(std::span<const std::byte> bytes, const std::string& file);

// The pickle torch.save writes for a dict of contiguous tensors, one storage per tensor (keys as given).
struct WriteTensor {
    std::string name;
    DType dtype = DType::BF16;
    std::string storage_key;
    std::vector<int64_t> shape;
};
std::string write_state_dict(const std::vector<WriteTensor>& tensors);

// Contiguous (row-major) strides of a shape, as torch computes them.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

}  // namespace strata::pickle
