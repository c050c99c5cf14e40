// SliceBarrier (backends/slice_group.h), the rendezvous of the batch slices'
// threads. What a step relies on: no thread passes a wait before every party
// has reached it, also when the threads outnumber the cores and one is
// descheduled; a waiter whose partner is away sleeps instead of holding its
// core; an abort wakes every waiter, parked or not, and reset() makes the
// barrier whole again for the next step.
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/slice_group.h"

namespace convoy {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// More parties than any test machine's free cores: each round every party
// writes its slot, waits, checks that every slot holds this round, waits.
// A party that passed early would see a slot of the last round. Party 0
// sleeps now and then, so the others park and must be woken.
TEST(SliceBarrier, OrdersRoundsWithMorePartiesThanCores) {
  const int parties = static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency() + 1));
  constexpr int kRounds = 300;
  SliceBarrier barrier(parties);
  std::vector<std::atomic<int>> slot(static_cast<std::size_t>(parties));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < parties; ++p)
    threads.emplace_back([&, p] {
      for (int round = 1; round <= kRounds; ++round) {
        if (p == 0 && round % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        slot[static_cast<std::size_t>(p)].store(round, std::memory_order_relaxed);
        barrier.wait();
        for (const auto& s : slot)
          if (s.load(std::memory_order_relaxed) != round) wrong.fetch_add(1);
        barrier.wait();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0) << "a party passed the barrier before every party had written its slot";
}

// The spin is bounded: a waiter whose partner sleeps 200 ms parks, so it
// uses a few microseconds of CPU, not the 200 ms of a spin or yield loop.
TEST(SliceBarrier, WaiterParksWhileItsPartnerSleeps) {
  SliceBarrier barrier(2);
  double cpu = -1, wall = -1;
  std::thread waiter([&] {
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    barrier.wait();
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = thread_cpu_seconds() - cpu0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  barrier.wait();
  waiter.join();
  EXPECT_GE(wall, 0.15);
  EXPECT_LT(cpu, 0.02) << "the waiter used " << cpu * 1e3 << " ms of CPU in " << wall * 1e3 << " ms of waiting";
}

// abort() wakes parked waiters to throw SliceAborted; later waits throw at
// once; after reset() the parties meet again as if nothing happened (the
// aborted waits' arrivals are not counted toward the next rendezvous).
TEST(SliceBarrier, AbortWakesParkedWaitersAndResetRestores) {
  constexpr int kParties = 3;
  SliceBarrier barrier(kParties);
  std::atomic<int> aborted{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kParties - 1; ++i)
    waiters.emplace_back([&] {
      try {
        barrier.wait();
      } catch (const SliceAborted&) {
        aborted.fetch_add(1);
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // long past the spin: both parked
  barrier.abort();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(aborted.load(), kParties - 1);
  EXPECT_THROW(barrier.wait(), SliceAborted);

  barrier.reset();
  std::atomic<int> arrived{0}, early{0};
  std::vector<std::thread> again;
  for (int i = 0; i < kParties; ++i)
    again.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
      arrived.fetch_add(1);
      barrier.wait();
      if (arrived.load() != kParties) early.fetch_add(1);
      barrier.wait();  // a second round: a stale count would leave some parties here for ever
    });
  for (auto& t : again) t.join();
  EXPECT_EQ(early.load(), 0) << "a party passed before all had arrived";
}

// An abort racing with arrivals: every party either passes (the rendezvous
// completed first) or throws, and none is left waiting (the test ends).
TEST(SliceBarrier, AbortRacingArrivalsLeavesNoWaiter) {
  for (int trial = 0; trial < 200; ++trial) {
    SliceBarrier barrier(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([&] {
        try {
          barrier.wait();
        } catch (const SliceAborted&) {
        }
      });
    barrier.abort();
    for (auto& t : threads) t.join();
  }
  SUCCEED();
}

}  // namespace
}  // namespace convoy
