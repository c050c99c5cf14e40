#include "convoy/io/output_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"

namespace convoy::io {
namespace {

namespace fs = std::filesystem;

std::string holder_of(int fd) {
  char buffer[256] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string text(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "another convoy run" : shown(text, 120);
}

}  // namespace

OutputLock::OutputLock(const std::string& dir) : path_((fs::path(dir) / kLockFile).string()) {
  // Retried when the file we locked was removed by its releasing holder in
  // the meantime (then a third run may hold a fresh one).
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw UserError(path_ + ": cannot create the output folder's lock (" + std::strerror(errno) +
                      "); pass a writable --out DIR");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == ENOLCK || err == EOPNOTSUPP) {  // a file system without locks (some NFS setups): run unlocked
        ::close(fd_);
        fd_ = -1;
        ::unlink(path_.c_str());
        return;
      }
      const std::string holder = err == EWOULDBLOCK ? holder_of(fd_) : std::string();
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw UserError(dir + ": another run is writing to this folder (" + holder +
                        "); wait for it to end, or pass another --out");
      throw UserError(path_ + ": cannot lock the output folder (" + std::strerror(err) + ")");
    }
    struct stat locked {}, now {};
    if (::fstat(fd_, &locked) == 0 && ::stat(path_.c_str(), &now) == 0 && locked.st_ino == now.st_ino &&
        locked.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) throw UserError(path_ + ": cannot lock the output folder (it keeps changing)");
  listed_.emplace(path_);
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string who = "convoy pid " + std::to_string(::getpid()) + " on " + host + ", started " + when + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, who.data(), who.size(), 0);
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  listed_.reset();  // unlisted first: after the unlink the name may be a new run's lock
  ::unlink(path_.c_str());  // while still held: a waiting run then locks a fresh file
  ::close(fd_);
}

FolderGuard::FolderGuard(const std::string& dir, std::vector<std::string> progress, std::vector<std::string> outputs)
    : dir_(dir), exceptions_(std::uncaught_exceptions()), outputs_(outputs.begin(), outputs.end()) {
  outputs_.insert(kLockFile);
  std::error_code ec;
  created_ = !fs::exists(dir_, ec);
  for (const auto& entry : fs::directory_iterator(dir_, ec)) before_.insert(entry.path().filename().string());
  for (std::string& name : progress) {
    const auto when = fs::last_write_time(dir_ / name, ec);
    progress_.emplace_back(std::move(name), ec ? fs::file_time_type::min() : when);
  }
}

FolderGuard::~FolderGuard() {
  if (kept_ || std::uncaught_exceptions() <= exceptions_) return;
  std::error_code ec;
  for (const auto& [name, when] : progress_) {
    const auto now = fs::last_write_time(dir_ / name, ec);
    if (!ec && now != when) return;  // a checkpoint to resume from: keep everything
  }
  std::vector<fs::path> added;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = outputs_.count(name) || name.find(kTemporaryMark) != std::string::npos;
    if (ours && !before_.count(name)) added.push_back(entry.path());
  }
  for (const fs::path& p : added) fs::remove_all(p, ec);
  if (created_) fs::remove(dir_, ec);  // only when empty: nothing of anyone else's goes
}

}  // namespace convoy::io
