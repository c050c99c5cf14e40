#include "convoy/core/path_kind.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy {

std::string mode_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISREG(mode)) return "a file";
  if (S_ISFIFO(mode)) return "a pipe (FIFO)";
  return "a device or socket";
}

std::string path_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0) return "a broken symbolic link";
    if (err == ENOENT || err == ENOTDIR) return "missing";
    return std::string("unreadable (") + std::strerror(err) + ")";
  }
  return mode_kind(st.st_mode);
}

void require_folder(const std::string& path, const std::string& named, const std::string& todo) {
  const std::string kind = path_kind(path);
  if (kind == "a folder") return;
  const std::string what = kind == "missing"             ? "no such folder"
                           : kind.starts_with("unreadable") ? "cannot be read" + kind.substr(10)
                                                             : "is " + kind + ", not a folder";
  throw UserError(named + shown(path, 160) + ": " + what + "; " + todo);
}

}  // namespace convoy
