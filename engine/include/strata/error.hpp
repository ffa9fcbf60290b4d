#pragma once
// Typed errors. The engine never exits and never aborts on bad input: it throws one of these, with the
// context a person needs (file, tensor, offset, expected vs found). app/ decides what a person sees.
#include <stdexcept>
#include <string>

namespace strata {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A file that is not what it claims: truncated, lying header, bad offsets, unknown dtype, bad pickle opcode.
struct FormatError : Error {
    using Error::Error;
};

// A model whose parts disagree: missing tensor, shape contradicting the config, NaN/Inf in weights.
struct ModelError : Error {
    using Error::Error;
};

// A tokenizer file that cannot be used, or a missing tokenizer.
struct TokenizerError : Error {
    using Error::Error;
};

// A request the model cannot serve: token id >= vocab, empty prompt, prompt longer than the context.
struct InputError : Error {
    using Error::Error;
};

// A type or feature that Strata does not support (yet): "not supported yet: Q4_K in blk.0.attn_q.weight".
struct UnsupportedError : Error {
    using Error::Error;
};

// A Vulkan failure: missing device or feature, out of device memory, a failed call (with its VkResult).
struct DeviceError : Error {
    using Error::Error;
};

// The GPU was reset or stopped responding (VK_ERROR_DEVICE_LOST). Every later step on that device fails the
// same way: the model has to be opened again (on the CPU backend, or on Vulkan to retry).
struct DeviceLostError : DeviceError {
    using DeviceError::DeviceError;
};

// The caller cancelled (load, prefill, generation). Not a failure: a clean stop.
struct Cancelled : Error {
    Cancelled() : Error("cancelled") {}
};

}  // namespace strata
