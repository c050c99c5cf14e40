// The NCCL group (convoy/dist/nccl.h): one communicator per replica, one GPU
// each. Every collective runs on the group's own stream, in the order the
// replica issues them, which is the same on every replica: NCCL requires
// that order, and two collectives of one communicator running at once on
// two streams could each wait for a peer busy with the other. The stream
// forks from the executable's compute stream at each collective (an event:
// "the data is ready") and joins it where the results are needed (before
// the update; right after a batch-norm sum), so gradient buckets travel
// while earlier layers' backward still runs, and captured CUDA graphs carry
// the whole exchange.
//
// Watching: the GPU counts in mapped host memory the collectives it starts
// and ends (nccl_marks.h: counted by the GPU, so replays of captured graphs
// count too); a watcher thread polls the counts and
// ncclCommGetAsyncError. One collective in progress for longer than the
// timeout, or an asynchronous error, stops the replica: one line on stderr,
// ncclCommAbort (bounded: it must not keep the process), exit code 3.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "backends/device_reducer.h"
#include "backends/gradient_buckets.h"
#include "convoy/core/error.h"
#include "convoy/dist/nccl.h"
#include "dist/nccl_library.h"
#include "dist/nccl_marks.h"

namespace convoy::dist {
namespace {

using Clock = std::chrono::steady_clock;

// Set once this replica is being stopped: later failures exit without a word.
std::atomic<bool> g_stopping{false};

// write(2): the other thread may hold stdio's lock while it waits for the GPU.
void say(const std::string& line) {
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  (void)written;  // nothing more to do if stderr is gone
}

const NcclLibrary& library_or_throw() {
  std::string why;
  const NcclLibrary* lib = nccl_library(&why);
  if (!lib) throw UserError("--strategy nccl: " + why);
  return *lib;
}

}  // namespace

std::string nccl_unavailable() {
  std::string why;
  return nccl_library(&why) ? "" : why;
}

NcclId nccl_new_id() {
  const NcclLibrary& nccl = library_or_throw();
  ncclUniqueId uid;
  static_assert(sizeof uid == sizeof(NcclId));
  const ncclResult_t r = nccl.get_unique_id(&uid);
  if (r != ncclSuccess) throw UserError("NCCL could not make its unique id (ncclGetUniqueId: " + nccl.describe(r, nullptr) +
                                        "); NCCL_DEBUG=WARN says more, NCCL_SOCKET_IFNAME picks the network interface");
  NcclId id;
  std::memcpy(id.data(), &uid, sizeof uid);
  return id;
}

struct NcclGroup::Impl final : DeviceGradientReducer {
  Impl(const NcclId& id, int rank_, int world_, int gpu_, const NcclOptions& o)
      : nccl(library_or_throw()), rank(rank_), world(world_), gpu(gpu_),
        bucket_floats(static_cast<std::size_t>(o.bucket_kib) * 1024 / sizeof(float)), timeout(o.timeout_seconds) {
    require(world >= 1 && rank >= 0 && rank < world,
            "NCCL group: rank " + std::to_string(rank) + " of " + std::to_string(world) + " is out of range");
    require(o.timeout_seconds > 0 && o.bucket_kib >= 0, "NCCL group: the timeout must be positive, buckets >= 0");
    CUDA_CHECK(cudaSetDevice(gpu));
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    if (const ncclResult_t r = nccl.comm_init_rank(&comm, world, uid, rank); r != ncclSuccess)
      throw UserError("NCCL could not start replica " + std::to_string(rank) + " of " + std::to_string(world) +
                      " on GPU " + std::to_string(gpu) + " (ncclCommInitRank: " + nccl.describe(r, nullptr) +
                      "); NCCL takes one replica per GPU; NCCL_DEBUG=WARN says more");
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&to_comm, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&to_compute, cudaEventDisableTiming));
    void* host = nullptr;
    CUDA_CHECK(cudaHostAlloc(&host, sizeof(CollectiveMarks), cudaHostAllocMapped));
    std::memset(host, 0, sizeof(CollectiveMarks));
    marks = static_cast<CollectiveMarks*>(host);
    void* device = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    device_marks = static_cast<CollectiveMarks*>(device);
    watcher = std::thread([this] { watch(); });
  }

  ~Impl() override {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    wake.notify_all();
    if (watcher.joinable()) watcher.join();
    // While an exception unwinds, a peer may be gone: waiting for the
    // collectives (or destroying, which waits too) could hang, so abort.
    if (std::uncaught_exceptions() > 0) {
      if (comm) nccl.comm_abort(comm);
    } else {
      if (comm_stream) cudaStreamSynchronize(comm_stream);
      if (comm) nccl.comm_destroy(comm);
    }
    if (to_comm) cudaEventDestroy(to_comm);
    if (to_compute) cudaEventDestroy(to_compute);
    if (comm_stream) cudaStreamDestroy(comm_stream);
    if (marks) cudaFreeHost(marks);
  }

  void bind(int device, void* stream) override {
    require(device == gpu, "an executable on cuda:" + std::to_string(device) + " cannot join the NCCL group of GPU " +
                               std::to_string(gpu));
    compute = static_cast<cudaStream_t>(stream);
  }

  void ready(std::span<float> layer) override {
    buckets.ready(layer, [this](std::span<float> bucket) { send(bucket); });
  }

  void finish(std::span<float> gradients) override {
    buckets.finish(gradients, [this](std::span<float> bucket) { send(bucket); });
    if (forked) join();
  }

  // A capture of steps failed half-way (backends/program.h): the buckets it
  // announced will never be sent by the eager rerun's finish(), and the fork
  // it may have recorded belonged to the abandoned capture, which ended with it.
  void abandon_step() override {
    buckets.abandon();
    forked = false;
  }

  void sum_statistics(double* values, std::size_t n) override {
    fork();
    allreduce(values, n, ncclFloat64, ncclSum);
    join();
  }

  void send(std::span<float> bucket) {
    fork();
    allreduce(bucket.data(), bucket.size(), ncclFloat32, ncclAvg);
  }

  // The group's stream waits for everything enqueued on the compute stream so far.
  void fork() {
    require(compute != nullptr, "NCCL group: no executable is bound (ExecutableInternals::set_gradient_reducer)");
    CUDA_CHECK(cudaEventRecord(to_comm, compute));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream, to_comm, 0));
    forked = true;
  }

  // The compute stream waits for every collective enqueued so far.
  void join() {
    CUDA_CHECK(cudaEventRecord(to_compute, comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(compute, to_compute, 0));
    forked = false;
  }

  void allreduce(void* data, std::size_t count, ncclDataType_t type, ncclRedOp_t op) {
    const std::size_t bytes = count * (type == ncclFloat64 ? sizeof(double) : sizeof(float));
    CUDA_CHECK(mark_started(device_marks, comm_stream));
    check(nccl.all_reduce(data, data, count, type, op, comm, comm_stream), "ncclAllReduce");
    CUDA_CHECK(mark_finished(device_marks, bytes, comm_stream));
  }

  // A collective that cannot even be enqueued leaves the group unusable.
  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    if (g_stopping.load()) std::_Exit(kFailedReplicaExitCode);
    const bool peer = r == ncclRemoteError || r == ncclSystemError;
    stop_replica(std::string(call) + " failed (" + nccl.describe(r, comm) + ")" +
                 (peer ? "; another replica has probably died" : ""));
  }

  void watch() {
    const auto period = std::chrono::duration<double>(std::clamp(timeout / 10, 0.001, 0.1));
    unsigned long long seen = 0;
    bool waiting = false;
    Clock::time_point since;
    std::unique_lock lock(mutex);
    while (!wake.wait_for(lock, period, [this] { return stop; })) {
      ncclResult_t async = ncclSuccess;
      if (nccl.comm_get_async_error(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        stop_replica("NCCL reports a failed collective (" + nccl.describe(async, comm) +
                     "); another replica has probably died");
      const unsigned long long started = marks->started, finished = marks->finished;
      if (started == finished) {
        waiting = false;
        continue;
      }
      const auto now = Clock::now();
      if (!waiting || started != seen) {  // a new collective began: time it from now
        waiting = true;
        seen = started;
        since = now;
        continue;
      }
      const double waited = std::chrono::duration<double>(now - since).count();
      if (waited >= timeout) {
        char what[200];
        std::snprintf(what, sizeof what,
                      "waited %.0f s for the other replicas in a collective on GPU %d; one of them has died or hangs "
                      "(the limit is --dist-timeout)",
                      waited, gpu);
        stop_replica(what);
      }
    }
  }

  // One line, then ncclCommAbort (so this replica's kernels end and its
  // connections close), waiting at most 2 s for it, then exit.
  [[noreturn]] void stop_replica(const std::string& why) {
    if (g_stopping.exchange(true)) std::_Exit(kFailedReplicaExitCode);
    say("convoy: error: replica " + std::to_string(rank) + " of " + std::to_string(world) + " " + why +
        ". Stopping this replica.\n");
    static std::atomic<bool> aborted{false};
    std::thread([this] {
      nccl.comm_abort(comm);
      aborted.store(true);
    }).detach();
    for (int i = 0; i < 200 && !aborted.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::_Exit(kFailedReplicaExitCode);
  }

  const NcclLibrary& nccl;
  int rank, world, gpu;
  std::size_t bucket_floats;  // 0: one allreduce in finish()
  double timeout;
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr;      // the bound executable's stream
  cudaStream_t comm_stream = nullptr;  // every collective, in issue order
  cudaEvent_t to_comm = nullptr, to_compute = nullptr;
  CollectiveMarks* marks = nullptr;         // the host's view
  CollectiveMarks* device_marks = nullptr;  // the GPU's address of the same words
  GradientBuckets buckets{bucket_floats};
  bool forked = false;       // collectives enqueued that the compute stream has not joined
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread watcher;
};

NcclGroup::NcclGroup(const NcclId& id, int rank, int world, int gpu, const NcclOptions& options)
    : impl_(std::make_unique<Impl>(id, rank, world, gpu, options)) {}
NcclGroup::~NcclGroup() = default;
int NcclGroup::rank() const { return impl_->rank; }
int NcclGroup::world_size() const { return impl_->world; }
int NcclGroup::gpu() const { return impl_->gpu; }
GradientReducer* NcclGroup::gradient_reducer() { return impl_.get(); }
// What the GPU counted (nccl_marks.h): the collectives that ran, replays of
// captured steps included. Exact once the steps are done (a summary).
CommStats NcclGroup::stats() const {
  return {.collectives = static_cast<int64_t>(impl_->marks->finished),
          .bytes = static_cast<double>(impl_->marks->bytes)};
}

}  // namespace convoy::dist
