// IDX files as they are on disk, uncompressed: read_idx_u8 must return a
// tensor or throw UserError, never crash or allocate what the file cannot hold.
#include <cstdint>

#include "convoy/core/error.h"
#include "convoy/data/idx.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = convoy::fuzz::input_file(data, size, ".idx");
  try {
    const convoy::Tensor t = convoy::data::read_idx_u8(path);
    const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;  // zlib reads those as gzip
    if (!gzip && t.nbytes() > size) __builtin_trap();                    // more data than the file holds
  } catch (const convoy::UserError&) {
  }
  return 0;
}
