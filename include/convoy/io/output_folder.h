#pragma once
// An output folder one run owns: a lock against a second run, and a guard
// that puts the folder back as it was when the run fails before it has
// written anything worth keeping (docs/reliability.md, "Hostile input").
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convoy/core/temporary_files.h"

namespace convoy::io {

// Held for the run's lifetime: flock on `<dir>/.convoy-lock`, which also
// names the holder (pid, host, start). A second run fails with a UserError
// naming the holder. The kernel drops the lock when its process dies, so the
// lock of a killed run is taken over, never waited on. The file is removed
// when the lock is released. On a file system without locks (ENOLCK, some
// NFS setups) the run goes on unlocked. Once held, the file is listed with
// the temporaries (core/temporary_files.h), so a run ended at once (a second
// Ctrl-C, a crash) leaves no lock file in the user's folder either.
class OutputLock {
 public:
  explicit OutputLock(const std::string& dir);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
  std::optional<InFlightTemporary> listed_;  // only while held: never another run's lock
};
inline constexpr const char* kLockFile = ".convoy-lock";

// Snapshot of `dir` taken before a run writes into it. Destroyed while an
// exception unwinds, unless keep() was called or one of `progress` (files a
// resume can start from) was written since, it removes the entries the run
// added — only those named in `outputs` (what a run writes), the lock and
// convoy's temporaries, so nothing another program put there meanwhile goes —
// and the folder itself when the run created it and it is empty then.
// Entries that were there before are left alone.
class FolderGuard {
 public:
  FolderGuard(const std::string& dir, std::vector<std::string> progress, std::vector<std::string> outputs);
  ~FolderGuard();
  FolderGuard(const FolderGuard&) = delete;
  FolderGuard& operator=(const FolderGuard&) = delete;
  void keep() { kept_ = true; }

 private:
  std::filesystem::path dir_;
  bool created_ = false, kept_ = false;
  int exceptions_ = 0;
  std::set<std::string> before_, outputs_;
  std::vector<std::pair<std::string, std::filesystem::file_time_type>> progress_;
};

}  // namespace convoy::io
