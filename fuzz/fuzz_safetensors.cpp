// safetensors bytes (model weights, checkpoints): parse_safetensors returns
// tensors that lie inside the input, or throws UserError.
#include <cstdint>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    convoy::io::Metadata meta;
    const auto tensors =
        convoy::io::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", &meta);
    for (const auto& [name, t] : tensors)
      if (t.nbytes() > size) __builtin_trap();  // data must come from the input
  } catch (const convoy::UserError&) {
  }
  return 0;
}
