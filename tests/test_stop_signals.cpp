// Stop signals land on their own thread (app/graceful_stop.h), never on a
// thread running a kernel: oneDNN 2.6's JIT sgemm points the stack pointer
// into a heap buffer while it runs, so a handler landing there writes its
// signal frame over the heap (docs/reliability.md, "Graceful stop").
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <cstdlib>
#include <thread>
#include <vector>

#include "backends/cpu/sgemm.h"
#include "convoy/app/graceful_stop.h"
#include "convoy/core/temporary_files.h"

namespace {

using convoy::train::StopSignals;

bool blocks_stop_signals() {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1;
}

// Each death test runs in a fresh process (threadsafe style: the binary
// again, this test only), where the routing is set up before any thread.
class StopSignalRouting : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Exits 0 when every thread started after the routing blocks both signals
// and a SIGTERM to the process still reaches the handler.
[[noreturn]] void route_then_check_the_masks() {
  convoy::train::take_stop_signals_on_their_own_thread();
  if (!blocks_stop_signals()) std::_Exit(3);
  bool worker_blocks = false;
  std::thread([&] { worker_blocks = blocks_stop_signals(); }).join();
  if (!worker_blocks) std::_Exit(4);
  const StopSignals stop;
  ::kill(::getpid(), SIGTERM);  // to the process: the waiting thread takes it
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (StopSignals::received() == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::_Exit(StopSignals::received() == SIGTERM ? 0 : 5);
}

TEST_F(StopSignalRouting, EveryLaterThreadBlocksThemAndAStopStillArrives) {
  EXPECT_EXIT(route_then_check_the_masks(), ::testing::ExitedWithCode(0), "");
}

// Stop signals sent as fast as the handler takes them while this thread runs
// oneDNN's sgemm with heap traffic around it. Without the routing, this
// corrupts the heap within a second on AVX2 and AVX-512 machines alike
// (glibc aborts: "corrupted size vs. prev_size", or a fault).
[[noreturn]] void route_then_sgemm_under_a_storm() {
  convoy::train::take_stop_signals_on_their_own_thread();
  const StopSignals stop;
  std::atomic<bool> done{false};
  std::atomic<long> taken{0};
  std::thread storm([&] {
    while (!done.load()) {
      ::kill(::getpid(), SIGTERM);
      while (StopSignals::received() == 0 && !done.load()) std::this_thread::yield();
      StopSignals::reset();  // a second one while set would end the process at once
      taken.fetch_add(1);
    }
  });
  const int64_t m = 192, n = 256, k = 768;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
    std::vector<float> a(static_cast<std::size_t>(m * k), 1.0f), b(static_cast<std::size_t>(k * n), 0.5f);
    std::vector<float> c(static_cast<std::size_t>(m * n));
    std::vector<char> other(static_cast<std::size_t>(100 + i % 997));  // heap traffic between the calls
    convoy::cpu::sgemm('N', 'N', m, n, k, a.data(), k, b.data(), n, c.data(), n);
    if (c[0] != 0.5f * static_cast<float>(k) || c.back() != c[0]) std::_Exit(6);
  }
  done.store(true);
  storm.join();
  std::_Exit(taken.load() >= 20 ? 0 : 7);  // the storm did reach the handler (thousands when quiet)
}

TEST_F(StopSignalRouting, SgemmUnderAStormOfStopSignalsLeavesTheHeapWhole) {
  EXPECT_EXIT(route_then_sgemm_under_a_storm(), ::testing::ExitedWithCode(0), "");
}

// The sweep a stop makes before it ends the process runs beside the writers
// now: it removes the listed file and holds the slot, and a writer that then
// frees its slot (its next step would rename the removed file and print an
// error) or lists a new file sleeps until the exit instead.
[[noreturn]] void sweep_then_try_to_write_on() {
  const std::string dir = ::testing::TempDir() + "sweep-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string listed = dir + "/a.convoy-tmp.1", later = dir + "/b.convoy-tmp.1";
  std::atomic<bool> freed{false}, made{false};
  auto* first = new convoy::InFlightTemporary(listed);
  std::fclose(std::fopen(listed.c_str(), "w"));
  convoy::remove_in_flight_temporaries();  // what a stop's handler does, here on this thread
  if (std::filesystem::exists(listed)) std::_Exit(3);
  std::thread([&] {
    delete first;  // must wait for the end
    freed.store(true);
  }).detach();
  std::thread([&] {
    const convoy::InFlightTemporary second(later);  // must wait for the end
    made.store(true);
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::_Exit(freed.load() ? 4 : made.load() ? 5 : 0);
}

TEST(TemporaryFiles, TheSweepBeforeAnExitHoldsEveryWriterThatComesAfterIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(sweep_then_try_to_write_on(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
