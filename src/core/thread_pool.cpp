#include "convoy/core/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "convoy/core/error.h"

#include "convoy/core/threads.h"

namespace convoy {

ThreadPool::ThreadPool(int threads) {
  workers_.reserve(std::max(threads, 1));
  try {
    for (int i = 0; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // The workers already started are joined (a joinable std::thread
    // destroyed would abort the process), and the cause is one line.
    stop();
    throw UserError("cannot start " + std::to_string(threads) + " worker threads (" + e.code().message() +
                    " at thread " + std::to_string(workers_.size() + 1) + "); use fewer --threads");
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void ThreadPool::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

ThreadPool& ThreadPool::shared() {
  static ThreadPool pool(configured_threads());  // --threads, when set before the first use
  return pool;
}

}  // namespace convoy
