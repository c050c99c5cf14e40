#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header
// mapping names to {dtype, shape, data_offsets}, then the raw data. Used for
// model weights and for the PyTorch parity fixtures.
#include <functional>
#include <map>
#include <string>

#include "convoy/core/tensor.h"

namespace convoy::io {

using NamedTensors = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;  // the header's "__metadata__"

// Reads F32, I32 and U8 tensors. Throws UserError naming the file and the
// problem when it is missing, truncated or malformed. Tensors for which
// `skip(name)` is true are left out unread (any dtype).
NamedTensors read_safetensors(const std::string& path, Metadata* metadata = nullptr,
                              const std::function<bool(const std::string&)>& skip = {});

// Writes atomically (see atomic_file.h).
void write_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

}  // namespace convoy::io
