#pragma once
// A watchdog for collectives: a blocking allreduce whose peer died or hangs
// would wait forever, so every wait is watched from a thread of its own. When
// one lasts longer than the timeout the watchdog calls `on_timeout` (by
// default: print one line and _exit, so the launcher stops the job). No MPI
// call is made from the watchdog's thread.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace convoy::dist {

class Watchdog {
 public:
  // Called on the watchdog's thread with what was being waited for and how
  // long; the default handler never returns.
  using OnTimeout = std::function<void(const char* what, double waited_seconds)>;

  Watchdog(double timeout_seconds, OnTimeout on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Marks the start and end of one wait; `what` must be a string literal.
  void enter(const char* what);
  void leave();
  double timeout_seconds() const { return timeout_; }

  // Watches one wait for its scope.
  class Guard {
   public:
    Guard(Watchdog& w, const char* what) : w_(w) { w_.enter(what); }
    ~Guard() { w_.leave(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  void watch();

  double timeout_;
  OnTimeout on_timeout_;
  std::atomic<int64_t> since_ns_{0};  // steady-clock start of the current wait; 0: not waiting
  std::atomic<const char*> what_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// The default OnTimeout: prints "convoy: error: replica R of N waited S s for
// <what> ..." to stderr and exits with kFailedReplicaExitCode.
Watchdog::OnTimeout exit_on_timeout(int rank, int world_size);

}  // namespace convoy::dist
