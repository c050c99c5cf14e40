#include "convoy/app/graceful_stop.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

namespace convoy::train {
namespace {

// Lock-free, so reading and writing it in a handler is async-signal-safe.
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);

struct sigaction g_previous_int, g_previous_term;

extern "C" void on_stop_signal(int signal) {
  int expected = 0;
  if (!g_received.compare_exchange_strong(expected, signal)) _exit(128 + signal);  // the second one: at once
}

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  struct sigaction action{};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress carry on
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int StopSignals::received() { return g_received.load(); }
void StopSignals::reset() { g_received.store(0); }

void StopOnSignal::on_step_end(FitState& s) {
  if (StopSignals::received() != 0) s.interrupted = true;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace convoy::train
