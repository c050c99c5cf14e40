// The MPI strategy: one replica per MPI process, collectives from Open MPI
// (or any MPI-3 library), called only from the main thread (MPI_THREAD_FUNNELED).
// Gradients are summed with MPI_Allreduce / MPI_Iallreduce in place on the
// flat gradient buffer and divided by the number of replicas.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "convoy/dist/watchdog.h"
#include "dist/mpi_strategy.h"

namespace convoy::dist {
namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are ints: larger buffers go in pieces of this many elements.
constexpr std::size_t kMaxCount = std::size_t{1} << 30;

class MpiStrategy;

// Sums gradient buckets with MPI_Iallreduce as backward produces them. Layers
// arrive last first and their slices are adjacent in the flat buffer, so a
// bucket grows downwards until it holds bucket_floats, then it is sent while
// backward goes on; finish() sends the rest and waits for all of them.
class BucketedReducer final : public GradientReducer {
 public:
  BucketedReducer(MpiStrategy& s, std::size_t bucket_floats) : s_(s), bucket_floats_(bucket_floats) {}
  void ready(std::span<float> layer) override;
  void finish(std::span<float> gradients) override;

 private:
  void send_pending();

  MpiStrategy& s_;
  std::size_t bucket_floats_;  // 0: no buckets, one blocking allreduce in finish()
  std::span<float> pending_;   // announced, not yet sent
  std::size_t sent_ = 0;       // floats sent this step
  std::vector<MPI_Request> in_flight_;
};

class MpiStrategy final : public Strategy {
 public:
  explicit MpiStrategy(const StrategyOptions& o) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_mpi_ = true;
    }
    // A communicator of our own, whose errors come back as codes so that we
    // can say what failed instead of MPI's generic abort.
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
    if (world_ > 1) {
      watchdog_ = std::make_unique<Watchdog>(o.timeout_seconds, exit_on_timeout(rank_, world_));
      reducer_ = std::make_unique<BucketedReducer>(*this, static_cast<std::size_t>(o.bucket_kib) * 1024 / sizeof(float));
    }
  }

  ~MpiStrategy() override {
    reducer_.reset();
    watchdog_.reset();
    // While an exception unwinds, this replica is failing and its peers may
    // sit in a collective: finalising (itself collective) could hang, so the
    // process exits without it and the launcher stops the job.
    if (std::uncaught_exceptions() > 0) return;
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void allreduce_mean(std::span<float> v) override {
    sum_in_place(v.data(), v.size(), MPI_FLOAT, sizeof(float), "an allreduce");
    divide(v);
  }
  void allreduce_sum(std::span<double> v) override {
    sum_in_place(v.data(), v.size(), MPI_DOUBLE, sizeof(double), "an allreduce");
  }
  void allreduce_sum(std::span<int64_t> v) override {
    sum_in_place(v.data(), v.size(), MPI_INT64_T, sizeof(int64_t), "an allreduce");
  }
  void broadcast(std::span<float> v) override {
    if (world_ == 1) return;
    Timed t(*this, "a broadcast from replica 0", v.size() * sizeof(float));
    for (std::size_t at = 0; at < v.size(); at += kMaxCount)
      check(MPI_Bcast(v.data() + at, count(v.size() - at), MPI_FLOAT, 0, comm_), "MPI_Bcast");
  }
  void barrier() override {
    if (world_ == 1) return;
    Timed t(*this, "a barrier", 0);
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  GradientReducer* gradient_reducer() override { return reducer_.get(); }
  CommStats stats() const override { return stats_; }

  // For BucketedReducer.
  void divide(std::span<float> v) const {
    if (world_ == 1) return;
    const float inv = 1.0f / static_cast<float>(world_);
    for (float& x : v) x *= inv;
  }
  void sum_in_place(void* data, std::size_t n, MPI_Datatype type, std::size_t bytes, const char* what) {
    if (world_ == 1 || n == 0) return;
    Timed t(*this, what, n * bytes);
    for (std::size_t at = 0; at < n; at += kMaxCount)
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * bytes, count(n - at), type, MPI_SUM, comm_),
            "MPI_Allreduce");
  }
  void start_sum(std::span<float> v, std::vector<MPI_Request>& requests) {
    stats_.collectives += 1;
    stats_.bytes += static_cast<double>(v.size() * sizeof(float));
    for (std::size_t at = 0; at < v.size(); at += kMaxCount) {
      requests.emplace_back();
      check(MPI_Iallreduce(MPI_IN_PLACE, v.data() + at, count(v.size() - at), MPI_FLOAT, MPI_SUM, comm_,
                           &requests.back()),
            "MPI_Iallreduce");
    }
  }
  // Lets MPI move started buckets along (MPI progresses only inside its calls).
  void progress(std::vector<MPI_Request>& requests) {
    int done = 0;
    check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  }
  void wait(std::vector<MPI_Request>& requests) {
    Watchdog::Guard guard(*watchdog_, "the gradient allreduce");
    const auto start = Clock::now();
    check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    stats_.wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    requests.clear();
  }

 private:
  // Watches one blocking call and adds it to the statistics.
  class Timed {
   public:
    Timed(MpiStrategy& s, const char* what, std::size_t bytes)
        : s_(s), guard_(*s.watchdog_, what), start_(Clock::now()) {
      s_.stats_.collectives += 1;
      s_.stats_.bytes += static_cast<double>(bytes);
    }
    ~Timed() { s_.stats_.wait_seconds += std::chrono::duration<double>(Clock::now() - start_).count(); }

   private:
    MpiStrategy& s_;
    Watchdog::Guard guard_;
    Clock::time_point start_;
  };

  static int count(std::size_t n) { return static_cast<int>(std::min(n, kMaxCount)); }

  // A failed collective leaves MPI unusable: say which and stop this replica
  // (the launcher then stops the others).
  void check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return;
    char reason[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, reason, &len);
    std::fprintf(stderr, "convoy: error: replica %d of %d: %s failed (%s); another replica has probably died. "
                 "Stopping this replica.\n", rank_, world_, call, reason);
    std::fflush(stderr);
    std::_Exit(kFailedReplicaExitCode);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  bool owns_mpi_ = false;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<BucketedReducer> reducer_;
  CommStats stats_;
};

void BucketedReducer::ready(std::span<float> layer) {
  if (bucket_floats_ == 0) return;
  if (!pending_.empty() && layer.data() + layer.size() != pending_.data()) send_pending();  // not adjacent
  pending_ = pending_.empty() ? layer : std::span<float>(layer.data(), layer.size() + pending_.size());
  if (pending_.size() >= bucket_floats_) send_pending();
  else if (!in_flight_.empty()) s_.progress(in_flight_);
}

void BucketedReducer::send_pending() {
  if (pending_.empty()) return;
  s_.start_sum(pending_, in_flight_);
  sent_ += pending_.size();
  pending_ = {};
}

void BucketedReducer::finish(std::span<float> gradients) {
  if (bucket_floats_ == 0) {
    s_.sum_in_place(gradients.data(), gradients.size(), MPI_FLOAT, sizeof(float), "the gradient allreduce");
  } else {
    send_pending();
    s_.wait(in_flight_);
    // Every gradient must have been announced by ready(): a backend bug otherwise.
    if (sent_ != gradients.size()) {
      std::fprintf(stderr, "convoy: internal error: gradient buckets covered %zu of %zu values\n", sent_,
                   gradients.size());
      std::abort();
    }
    sent_ = 0;
  }
  s_.divide(gradients);
}

}  // namespace

std::unique_ptr<Strategy> make_mpi_strategy(const StrategyOptions& options) {
  return std::make_unique<MpiStrategy>(options);
}

}  // namespace convoy::dist
