#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header
// mapping names to {dtype, shape, data_offsets}, then the raw data. Used for
// model weights, checkpoints and the PyTorch parity fixtures.
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "convoy/core/tensor.h"

namespace convoy::io {

using NamedTensors = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;  // the header's "__metadata__"

// Reads F32, I32 and U8 tensors. Throws UserError naming the file and the
// problem when it is missing, truncated or malformed. Tensors for which
// `skip(name)` is true are left out unread (any dtype).
using SkipTensor = std::function<bool(const std::string&)>;
NamedTensors read_safetensors(const std::string& path, Metadata* metadata = nullptr, const SkipTensor& skip = {});
// The same from the file's bytes; `where` names them in errors. Nothing is
// allocated for a tensor before its size is checked against the bytes there.
NamedTensors parse_safetensors(std::string_view bytes, const std::string& where, Metadata* metadata = nullptr,
                               const SkipTensor& skip = {});

// Writes atomically (see atomic_file.h).
void write_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
// The bytes write_safetensors writes.
std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata = {});

}  // namespace convoy::io
