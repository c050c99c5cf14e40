#include "convoy/app/graceful_stop.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <system_error>
#include <thread>

#include "convoy/io/atomic_file.h"

namespace convoy::train {
namespace {

// Lock-free, so reading and writing them in a handler is async-signal-safe.
std::atomic<int> g_received{0};
std::atomic<bool> g_in_fit{false};  // a StopSignals lives: the first signal stops after the step
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

// write(2) of a literal: all a handler may print.
template <std::size_t N>
void say(const char (&text)[N]) {
  const std::size_t n = N - 1;
  std::size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(STDERR_FILENO, text + done, n - done);
    if (w <= 0) return;
    done += static_cast<std::size_t>(w);
  }
}

extern "C" void on_stop_signal(int signal) {
  int expected = 0;
  if (g_in_fit.load() && g_received.compare_exchange_strong(expected, signal)) return;  // stop after the step
  // At once: no destructor runs, so no thread meets a destroyed static; only
  // the temporary files of writes in progress go (their targets stay as
  // they were: each is renamed in whole or not at all).
  convoy::remove_in_flight_temporaries();
  const bool second = g_in_fit.load();
  if (second) say("convoy: a second signal: stopped at once; the checkpoints written before are as they were\n");
  else if (signal == SIGINT) say("convoy: stopped by SIGINT\n");
  else say("convoy: stopped by SIGTERM\n");
  _exit(128 + signal);
}

struct Previous {
  struct sigaction int_action, term_action;
};

Previous install() {
  Previous previous;
  struct sigaction action{};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Either signal waits while the handler runs for the other, so the two
  // never race for the flag.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  action.sa_flags = SA_RESTART;  // reads and writes in progress carry on
  sigaction(SIGINT, &action, &previous.int_action);
  sigaction(SIGTERM, &action, &previous.term_action);
  return previous;
}

void restore(const Previous& previous) {
  sigaction(SIGINT, &previous.int_action, nullptr);
  sigaction(SIGTERM, &previous.term_action, nullptr);
}

// One of each scope at a time (a fit inside a command); the previous
// handlers of each are kept here, not in the objects, so that the header
// stays free of <signal.h>.
Previous g_before_fit, g_before_command;

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  g_in_fit.store(true);
  g_before_fit = install();
}

StopSignals::~StopSignals() {
  g_in_fit.store(false);  // from here a signal ends the process (or meets the handler from before)
  restore(g_before_fit);
}

int StopSignals::received() { return g_received.load(); }
void StopSignals::reset() { g_received.store(0); }

ExitOnSignals::ExitOnSignals() { g_before_command = install(); }
ExitOnSignals::~ExitOnSignals() { restore(g_before_command); }

void StopOnSignal::on_step_end(FitState& s) {
  if (StopSignals::received() != 0) s.interrupted = true;
}

void take_stop_signals_on_their_own_thread() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // It starts with them blocked too (threads inherit the mask) and opens
  // them itself; detached, it sleeps until the process ends.
  try {
    std::thread([stop] {
      pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
      for (;;) ::pause();
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (a process or memory limit): the signals open
    // here again, as before, rather than a command that cannot start.
    pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  }
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace convoy::train
