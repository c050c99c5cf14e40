#pragma once
// Temporary files: their names, and the list of those being written now, so
// that a process ending at once (a second Ctrl-C, a crash) leaves none of
// them beside a user's files. In core because every layer that writes a file
// through a temporary name (io's atomic writes, records' TFRecord writer,
// data's on-disk cache) holds one.
#include <string>

namespace convoy {

// Every temporary file convoy writes is named `<path>.convoy-tmp.<pid>`: a
// name no user would give a file of theirs, so that cleaning up never
// deletes one (io::remove_stale_temporaries removes those of dead processes).
inline constexpr const char* kTemporaryMark = ".convoy-tmp.";
std::string temporary_name(const std::string& path);

// Lists `path`, a temporary file about to be created, for as long as it
// lives (create it after this, rename or remove it before its end), so that
// remove_in_flight_temporaries() can remove it if the process must end at
// once. Every writer of temporary files holds one.
class InFlightTemporary {
 public:
  explicit InFlightTemporary(const std::string& path);
  ~InFlightTemporary();
  InFlightTemporary(const InFlightTemporary&) = delete;
  InFlightTemporary& operator=(const InFlightTemporary&) = delete;

 private:
  int slot_ = -1;  // -1: unlisted (every slot taken, or a path too long)
};

// Removes every temporary file listed now. Async-signal-safe: for the
// handlers that end the process at once (app/graceful_stop.h's second
// signal, app/crash_report.h's fatal ones). Those run beside the writers
// (signals are taken on their own thread), so with `process_ends` the
// slots stay held and every writer that next touches one (or lists a new
// file) sleeps until the process is gone: no file made after the sweep, no
// error from a rename of a removed file. A temporary whose writer passed
// those checks and creates it in the microseconds before the exit can
// remain; the next run's remove_stale_temporaries removes it where it
// looks. Tests pass false to keep the process going.
void remove_in_flight_temporaries(bool process_ends = true);

// Whether a handler is ending the process (the sweep above began): an error
// seen now is the sweep's doing, not the user's, and must not be printed.
bool process_ending();

// Sleeps until the process ends (a handler's _exit or re-raised signal).
[[noreturn]] void wait_for_the_end();

}  // namespace convoy
