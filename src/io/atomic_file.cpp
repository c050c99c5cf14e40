#include "convoy/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "convoy/core/error.h"

namespace convoy::io {
namespace {

[[noreturn]] void fail(const std::string& path, const char* doing) {
  throw UserError(path + ": cannot " + doing + " (" + std::strerror(errno) +
                  "); check that the folder exists, is writable and has free space");
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "write");
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      fail(path, "write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    fail(path, "flush");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    fail(path, "replace");
  }
}

void ensure_writable_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw UserError(dir + ": cannot create output folder (" + ec.message() + "); pass a writable --out DIR");
  const std::string probe = (std::filesystem::path(dir) / ".convoy-write-test").string();
  write_file_atomic(probe, "");
  std::filesystem::remove(probe, ec);
}

}  // namespace convoy::io
