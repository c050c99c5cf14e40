#include "convoy/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"

namespace convoy::io {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_test_write_pause_ms{0};

[[noreturn]] void fail(const std::string& path, const char* doing) {
  throw UserError(path + ": cannot " + doing + " (" + std::strerror(errno) +
                  "); check that the folder exists, is writable and has free space");
}

// Removes `tmp` and fails, keeping the errno of the step that went wrong.
[[noreturn]] void abandon(const std::string& tmp, const std::string& path, const char* doing) {
  const int saved = errno;
  ::unlink(tmp.c_str());
  errno = saved;
  fail(path, doing);
}

// A rename is durable once its folder is flushed. Best effort: some file
// systems refuse fsync on folders, and the data itself is already safe.
void sync_folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Points `keep_as` at the file now at `path`, in one atomic step.
void keep_previous(const std::string& path, const std::string& keep_as) {
  const std::string link_tmp = temporary_name(keep_as);
  const InFlightTemporary listed(link_tmp);
  ::unlink(link_tmp.c_str());
  if (::link(path.c_str(), link_tmp.c_str()) == 0) {
    if (::rename(link_tmp.c_str(), keep_as.c_str()) != 0) abandon(link_tmp, keep_as, "replace");
    return;
  }
  if (errno == ENOENT) return;  // nothing to keep yet
  // No hard links here (some network and FUSE file systems): move the file
  // instead. Until the new one is renamed in, only `keep_as` exists, which
  // readers that fall back to it handle.
  if (::rename(path.c_str(), keep_as.c_str()) != 0 && errno != ENOENT) fail(keep_as, "replace");
}

}  // namespace

void set_test_write_pause_ms(int ms) { g_test_write_pause_ms.store(ms); }

void require_replaceable(const std::string& path, const std::string& what_to_do) {
  // As root, `--output /dev/null` once replaced the device.
  if (struct stat st {}; ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)   ? "a folder"
                       : S_ISLNK(st.st_mode) ? "a symbolic link"
                       : S_ISFIFO(st.st_mode) ? "a pipe (FIFO)"
                                              : "a device or socket";
    throw UserError(path + ": is " + kind + ", not a file convoy may replace; " + what_to_do);
  }
}

void write_file_atomic(const std::string& path, std::string_view content, const AtomicWriteOptions& options) {
  require_replaceable(path);  // the rename below replaces whatever has the name
  const std::string tmp = temporary_name(path);
  const InFlightTemporary listed(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "write");
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      errno = saved;
      abandon(tmp, path, "write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    abandon(tmp, path, "flush");
  }
  if (::close(fd) != 0) abandon(tmp, path, "flush");
  if (const int pause = std::max(options.pause_before_rename_ms, g_test_write_pause_ms.load()); pause > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  if (!options.keep_previous_as.empty()) {
    try {
      keep_previous(path, options.keep_previous_as);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) abandon(tmp, path, "replace");
  sync_folder_of(path);
}

void ensure_writable_dir(const std::string& dir) {
  if (path_kind(dir) != "missing") require_folder(dir, "", "pass a new or existing folder as --out");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError(dir + ": cannot create output folder (" + ec.message() + "); pass a writable --out DIR");
  const std::string probe = (fs::path(dir) / ".convoy-write-test").string();
  write_file_atomic(probe, "");
  fs::remove(probe, ec);
}

int remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto mark = name.rfind(kTemporaryMark);
    if (mark == std::string::npos || mark == 0) continue;
    const std::string pid_text = name.substr(mark + std::string_view(kTemporaryMark).size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still be at work
    if (!fs::is_regular_file(entry.symlink_status(ec))) continue;            // convoy writes plain files only
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace convoy::io
