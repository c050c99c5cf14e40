#include "convoy/app/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstddef>

#include "convoy/core/temporary_files.h"

namespace convoy::train {
namespace {

constexpr int kFatal[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};

// write(2) of a literal (async-signal-safe).
template <std::size_t N>
void say(const char (&text)[N]) {
  (void)!::write(STDERR_FILENO, text, N - 1);
}

const char* name_of(int signal) {
  switch (signal) {
    case SIGABRT: return "SIGABRT (an abort: an uncaught exception, a failed check, heap corruption)";
    case SIGSEGV: return "SIGSEGV (an invalid memory access)";
    case SIGBUS: return "SIGBUS (a bad memory access)";
    case SIGFPE: return "SIGFPE (an arithmetic fault)";
    default: return "SIGILL (an illegal instruction)";
  }
}

extern "C" void on_fatal_signal(int signal) {
  say("convoy: internal error: ");
  const char* name = name_of(signal);
  std::size_t n = 0;
  while (name[n] != '\0') ++n;
  (void)!::write(STDERR_FILENO, name, n);
  say("; please report this with the lines below (addr2line -Cfe convoy ADDRESS names them)\n");
  // backtrace() is not on POSIX's list, but with libgcc loaded at install
  // time it neither allocates nor locks; and the process is lost anyway.
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
  // The process is lost, but the files it was writing need not stay beside
  // the user's as `<path>.convoy-tmp.<pid>` (unlink only: signal-safe).
  remove_in_flight_temporaries();
  // Die by the same signal: it is blocked while this handler runs, so it is
  // taken with the default action as soon as the handler returns (for a
  // fault, the instruction runs again and faults under the default action).
  struct sigaction fallback{};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  ::raise(signal);
}

}  // namespace

void install_crash_report() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return;  // the sanitizers' own reports say more
#endif
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  // Its own stack, so a stack overflow can still be reported.
  static char alternate[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate;
  stack.ss_size = sizeof alternate;
  ::sigaltstack(&stack, nullptr);
  struct sigaction action{};
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_ONSTACK;
  for (int signal : kFatal) ::sigaction(signal, &action, nullptr);
}

}  // namespace convoy::train
