// Writing TFRecord files, plain or gzip, to a temporary file that close()
// syncs and renames over the target.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"
#include "convoy/records/crc32c.h"
#include "convoy/records/tfrecord.h"

namespace convoy::records {

class detail::ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual bool write(const char* data, std::size_t n) = 0;
  virtual bool finish() = 0;  // flush and fsync; false (errno set) on failure
};

namespace {

class PlainSink final : public detail::ByteSink {
 public:
  explicit PlainSink(std::FILE* f) : f_(f) { std::setvbuf(f_, nullptr, _IOFBF, 1 << 18); }
  ~PlainSink() override {
    if (f_) std::fclose(f_);
  }
  bool write(const char* data, std::size_t n) override { return std::fwrite(data, 1, n, f_) == n; }
  bool finish() override {
    const bool flushed = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
    const int saved = errno;
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!flushed) errno = saved;  // the first failure is the one to report
    return flushed && closed;
  }

 private:
  std::FILE* f_;
};

// gzip through zlib on a duplicate of the file descriptor, so the original
// can still be synced after zlib closes its copy.
class GzipSink final : public detail::ByteSink {
 public:
  GzipSink(int fd, gzFile g) : fd_(fd), g_(g) { gzbuffer(g_, 1 << 18); }
  ~GzipSink() override {
    if (g_) gzclose(g_);
    if (fd_ >= 0) ::close(fd_);
  }
  bool write(const char* data, std::size_t n) override {
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
      if (gzwrite(g_, data, chunk) != static_cast<int>(chunk)) return false;
      data += chunk;
      n -= chunk;
    }
    return true;
  }
  bool finish() override {
    const bool zipped = gzclose(g_) == Z_OK;
    g_ = nullptr;
    const bool synced = zipped && ::fsync(fd_) == 0;
    const bool closed = ::close(fd_) == 0;
    fd_ = -1;
    return zipped && synced && closed;
  }

 private:
  int fd_;
  gzFile g_;
};

[[noreturn]] void cannot_write(const std::string& path) {
  throw UserError(path + ": cannot write (" + std::strerror(errno) +
                  "); check that the folder exists, is writable and has free space");
}

void store_le64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
void store_le32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace

TfRecordWriter::TfRecordWriter(std::string path, Compression compression)
    : path_(std::move(path)), temp_(io::temporary_name(path_)), listed_(temp_) {
  require(compression != Compression::detect, path_ + ": a writer needs compression none or gzip, not detect");
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) cannot_write(path_);
  if (compression == Compression::gzip) {
    const int zfd = ::dup(fd);
    gzFile g = zfd >= 0 ? gzdopen(zfd, "wb") : nullptr;
    if (!g) {
      if (zfd >= 0) ::close(zfd);
      ::close(fd);
      ::unlink(temp_.c_str());
      cannot_write(path_);
    }
    sink_ = std::make_unique<GzipSink>(fd, g);
  } else {
    std::FILE* f = ::fdopen(fd, "wb");
    if (!f) {
      ::close(fd);
      ::unlink(temp_.c_str());
      cannot_write(path_);
    }
    sink_ = std::make_unique<PlainSink>(f);
  }
}

TfRecordWriter::~TfRecordWriter() {
  if (sink_) {  // never closed: an error or an early exit; leave nothing behind
    sink_.reset();
    ::unlink(temp_.c_str());
  }
}

void TfRecordWriter::write(std::string_view data) {
  require(sink_ != nullptr, path_ + ": write after close");
  char header[12], footer[4];
  store_le64(header, data.size());
  store_le32(header + 8, masked_crc32c({header, 8}));
  store_le32(footer, masked_crc32c(data));
  if (!sink_->write(header, sizeof header) || !sink_->write(data.data(), data.size()) ||
      !sink_->write(footer, sizeof footer))
    cannot_write(path_);
  ++records_;
  bytes_ += sizeof header + data.size() + sizeof footer;
}

void TfRecordWriter::close() {
  require(sink_ != nullptr, path_ + ": closed twice");
  const bool finished = sink_->finish();
  int err = errno;
  sink_.reset();
  if (finished && ::rename(temp_.c_str(), path_.c_str()) == 0) return;
  if (finished) err = errno;
  ::unlink(temp_.c_str());
  errno = err;
  cannot_write(path_);
}

}  // namespace convoy::records
