#include "convoy/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::data {
namespace {

struct GzClose {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzClose>;

// Reads exactly `bytes` or throws; gzread also reads uncompressed files as is.
void read_exact(gzFile f, void* out, std::size_t bytes, const std::string& path, const std::string& what) {
  auto* dst = static_cast<unsigned char*>(out);
  std::size_t got = 0;
  while (got < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes - got, 1u << 30));
    const int n = gzread(f, dst + got, chunk);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw UserError(path + ": cannot read " + what + " (" + msg + "); the file is corrupt, replace it");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < bytes)
    throw UserError(path + ": truncated, " + what + " needs " + std::to_string(bytes) + " bytes but only " +
                    std::to_string(got) + " remain; the file is incomplete, replace it");
}

}  // namespace

Tensor read_idx_u8(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) throw UserError(path + ": cannot open (" + std::strerror(errno) + "); check the path");
  unsigned char magic[4];
  read_exact(file.get(), magic, 4, path, "the IDX header");
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0 || magic[3] > 4)
    throw UserError(path + ": not an IDX file (bad magic number); pass an IDX file such as train-images-idx3-ubyte.gz");
  if (magic[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02x", magic[2]);
    throw UserError(path + ": IDX element type " + type +
                    " is not supported; convoy reads unsigned-byte (0x08) IDX files");
  }
  Shape shape(magic[3]);
  for (auto& d : shape) {
    unsigned char be[4];
    read_exact(file.get(), be, 4, path, "the IDX dimensions");
    d = (int64_t{be[0]} << 24) | (be[1] << 16) | (be[2] << 8) | be[3];
  }
  // A corrupt header must not make us allocate what the file cannot hold: a
  // raw file holds its size, a deflate stream at most kMaxDeflateRatio times it.
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  const uint64_t limit = ec ? (uint64_t{1} << 40) : (gzdirect(file.get()) ? file_bytes : file_bytes * kMaxDeflateRatio);
  if (!shape_bytes_within(shape, 1, limit))
    throw UserError(path + ": truncated or corrupt, its IDX header " + to_string(shape) +
                    " asks for more data than the file can hold (at most " + std::to_string(limit) +
                    " bytes); replace the file");
  Tensor out(DType::u8, shape);
  read_exact(file.get(), out.raw(), out.nbytes(), path, "the data of shape " + to_string(shape));
  return out;
}

}  // namespace convoy::data
