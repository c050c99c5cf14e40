// Reading TFRecord files. A record's length is checked against its CRC, the
// size limit and (for plain files) the bytes left before anything is
// allocated, and gzip data is inflated in growing chunks, so a corrupt length
// can never make the reader reserve gigabytes.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "convoy/core/error.h"
#include "convoy/records/crc32c.h"
#include "convoy/records/tfrecord.h"

namespace convoy::records {
namespace {

constexpr std::size_t kHeaderBytes = 12, kFooterBytes = 4;

uint64_t load_le64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t load_le32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

bool has_gzip_magic(const char* p, std::size_t n) {
  return n >= 2 && static_cast<uint8_t>(p[0]) == 0x1f && static_cast<uint8_t>(p[1]) == 0x8b;
}
bool has_valid_plain_header(const char* p, std::size_t n) {
  return n >= kHeaderBytes && masked_crc32c({p, 8}) == load_le32(p + 8);
}

[[noreturn]] void cannot(const std::string& path, const std::string& doing) {
  throw UserError(path + ": cannot " + doing + " (" + std::strerror(errno) + "); check the path and permissions");
}

}  // namespace

Compression parse_compression(const std::string& value, const std::string& where) {
  if (value.empty() || value == "none") return Compression::none;
  if (value == "gzip") return Compression::gzip;
  if (value == "detect") return Compression::detect;
  throw UserError(where + ": compression must be 'none', 'gzip' or 'detect', got '" + value + "'");
}

// Bytes of the (uncompressed) stream: plain reads, or zlib's gzread.
class detail::ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::size_t read(char* dst, std::size_t n) = 0;  // fewer than n only at the end
  virtual std::optional<uint64_t> size() const = 0;        // the stream's size when known
};

namespace {

struct GzipError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PlainSource final : public detail::ByteSource {
 public:
  PlainSource(std::FILE* f, uint64_t size) : f_(f), size_(size) { std::setvbuf(f_, nullptr, _IOFBF, 1 << 18); }
  ~PlainSource() override { std::fclose(f_); }
  std::size_t read(char* dst, std::size_t n) override { return std::fread(dst, 1, n, f_); }
  std::optional<uint64_t> size() const override { return size_; }

 private:
  std::FILE* f_;
  uint64_t size_;
};

class GzipSource final : public detail::ByteSource {
 public:
  explicit GzipSource(gzFile g) : g_(g) { gzbuffer(g_, 1 << 18); }
  ~GzipSource() override { gzclose(g_); }
  std::size_t read(char* dst, std::size_t n) override {
    std::size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
      const int got = gzread(g_, dst + done, chunk);
      if (got < 0) throw_gzip_error();
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    if (done < n) {
      int err = Z_OK;
      gzerror(g_, &err);
      if (err != Z_OK) throw_gzip_error();  // a truncated stream ends with Z_BUF_ERROR
    }
    return done;
  }
  std::optional<uint64_t> size() const override { return std::nullopt; }

 private:
  [[noreturn]] void throw_gzip_error() {
    int err = Z_OK;
    const char* msg = gzerror(g_, &err);
    throw GzipError(std::string("gzip stream cannot be inflated (") + (msg && *msg ? msg : "zlib error") + ")");
  }

  gzFile g_;
};

}  // namespace

TfRecordReader::TfRecordReader(std::string path, Compression compression) : path_(std::move(path)) {
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) cannot(path_, "open TFRecord file");
  struct stat st{};
  if (::fstat(fileno(f), &st) != 0 || S_ISDIR(st.st_mode)) {
    std::fclose(f);
    throw UserError(path_ + ": is not a readable file; pass TFRecord files, not folders");
  }
  char head[kHeaderBytes];
  const std::size_t n = std::fread(head, 1, sizeof head, f);
  std::rewind(f);
  const bool magic = has_gzip_magic(head, n);
  gzipped_ = compression == Compression::gzip ||
             (compression == Compression::detect && magic && !has_valid_plain_header(head, n));
  if (compression == Compression::gzip && n > 0 && !magic) {
    std::fclose(f);
    throw UserError(path_ + ": is not gzip-compressed (no gzip header); read it with compression none or detect");
  }
  if (!gzipped_) {
    source_ = std::make_unique<PlainSource>(f, static_cast<uint64_t>(st.st_size));
    return;
  }
  const int fd = ::dup(fileno(f));
  std::fclose(f);
  gzFile g = fd >= 0 ? gzdopen(fd, "rb") : nullptr;
  if (!g) {
    if (fd >= 0) ::close(fd);
    cannot(path_, "open gzip-compressed TFRecord file");
  }
  source_ = std::make_unique<GzipSource>(g);
}

TfRecordReader::~TfRecordReader() = default;

std::string TfRecordReader::record_name() const {
  return path_ + ": record " + std::to_string(index_) + " at byte " + std::to_string(offset_);
}

void TfRecordReader::fail(const std::string& what, bool can_continue) {
  can_continue_ = can_continue;
  throw BadRecord(record_name() + ": " + what, "re-create the file");
}

std::size_t TfRecordReader::read_up_to(char* dst, std::size_t n) {
  try {
    const std::size_t got = source_->read(dst, n);
    position_ += got;
    return got;
  } catch (const GzipError& e) {
    fail(e.what());
  }
}

bool TfRecordReader::next(std::string& data) {
  require(can_continue_, path_ + ": reading past an earlier error at record " + std::to_string(index_) +
                             " is impossible; the file's framing is broken");
  offset_ = position_;
  ++index_;
  char header[kHeaderBytes];
  const std::size_t got = read_up_to(header, kHeaderBytes);
  if (got == 0) {
    if (index_ == 0) {
      can_continue_ = false;
      throw BadRecord(path_ + ": empty file, it holds no records", "re-create it or leave it out");
    }
    --index_;
    return false;
  }
  if (got < kHeaderBytes)
    fail("truncated (the file ends " + std::to_string(got) + " bytes into the 12-byte record header)");
  if (masked_crc32c({header, 8}) != load_le32(header + 8)) fail("length CRC mismatch (file corrupt)");
  const uint64_t length = load_le64(header);
  if (length > kMaxRecordBytes)
    fail("declares a length of " + std::to_string(length) + " bytes, over the " + std::to_string(kMaxRecordBytes) +
         "-byte limit (file corrupt)");
  if (const auto size = source_->size(); size && length + kFooterBytes > *size - position_)
    fail("truncated (declares " + std::to_string(length) + " bytes of data but only " +
         std::to_string(*size - position_) + " bytes are left, CRC included)");

  // Grow as bytes arrive: a gzip stream's size is unknown until inflated.
  data.clear();
  while (data.size() < length) {
    const std::size_t have = data.size();
    const std::size_t chunk = std::min<uint64_t>(length - have, std::max<std::size_t>(have, 1 << 16));
    data.resize(have + chunk);
    const std::size_t n = read_up_to(data.data() + have, chunk);
    if (n < chunk)
      fail("truncated (declares " + std::to_string(length) + " bytes of data, the file ends after " +
           std::to_string(have + n) + ")");
  }
  char footer[kFooterBytes];
  if (read_up_to(footer, kFooterBytes) < kFooterBytes) fail("truncated (the data CRC is missing)");
  if (masked_crc32c(data) != load_le32(footer)) fail("data CRC mismatch (file corrupt)", /*can_continue=*/true);
  return true;
}

}  // namespace convoy::records
