#pragma once
// A crash names itself: after install_crash_report(), SIGABRT, SIGSEGV,
// SIGBUS, SIGFPE and SIGILL write one line ("convoy: internal error: SIGABRT
// ...") and the stack's return addresses to stderr, then the process dies by
// the same signal as it would have (exit status 128 + signal, core dump where
// enabled). An abort that happens once under load is otherwise a bare
// "Aborted" with nothing to go on. The addresses are offsets into the binary:
// `addr2line -Cfe convoy 0x...` names them. (Sanitizer builds keep the
// sanitizers' own reports.)
namespace convoy::train {

void install_crash_report();

}  // namespace convoy::train
