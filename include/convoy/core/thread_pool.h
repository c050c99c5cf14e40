#pragma once
// A fixed pool of std::threads for work that does not belong to OpenMP: the
// input pipeline's parallel map runs its per-element functions here while the
// OpenMP threads run the training step. Workers sleep on a condition variable
// when there is nothing to do (no spinning), so an idle pipeline costs nothing.
//
// Tasks must not block waiting for other tasks of the same pool (that can
// deadlock a full pool) and must not throw: callers catch inside the task and
// hand errors back themselves.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace convoy {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  // Runs the tasks already queued, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task);
  int size() const { return static_cast<int>(workers_.size()); }

  // The process-wide pool, created on first use with configured_threads()
  // workers (core/threads.h: --threads, else one per hardware thread).
  static ThreadPool& shared();

 private:
  void work();
  void stop();  // lets the queued tasks finish, then joins the workers
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace convoy
