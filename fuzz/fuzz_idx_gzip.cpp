// gzip-compressed IDX files. Inputs that start with the gzip magic are used
// as they are (mutated deflate streams: corrupt and truncated archives);
// anything else is compressed first, so the fuzzer also explores the IDX
// header behind a valid gzip stream.
#include <zlib.h>

#include <cstdint>

#include "convoy/core/error.h"
#include "convoy/data/idx.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    path = convoy::fuzz::input_file(data, size, ".idx.gz");
  } else {
    path = convoy::fuzz::input_file(nullptr, 0, ".idx.gz");
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f || (size && gzwrite(f, data, static_cast<unsigned>(size)) != static_cast<int>(size))) __builtin_trap();
    gzclose(f);
  }
  try {
    convoy::data::read_idx_u8(path);
  } catch (const convoy::UserError&) {
  }
  return 0;
}
