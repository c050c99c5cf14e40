#pragma once
// Outputs are never half-written: content goes to a temporary file beside the
// target, is flushed to disk, then renamed over it in one step, and the
// folder is flushed so that the rename itself survives a power cut.
#include <string>
#include <string_view>

#include "convoy/core/temporary_files.h"

namespace convoy::io {

struct AtomicWriteOptions {
  // When set and `path` already exists, the file being replaced is kept under
  // this name (a hard link made before the rename: at every instant both
  // names hold a complete file).
  std::string keep_previous_as;
  // Test only: sleep between the flushed temporary file and the rename, so a
  // test can kill the process inside a write (CONVOY_TEST_CHECKPOINT_DELAY_MS).
  int pause_before_rename_ms = 0;
};

// Test only: every write_file_atomic in this process also sleeps `ms`
// between its flushed temporary file and the rename, so that a test can
// signal the process inside any write (the CLI reads
// CONVOY_TEST_WRITE_DELAY_MS; the library never reads the environment).
void set_test_write_pause_ms(int ms);

// `path` is absent or a regular file: what an atomic write may replace. A
// rename replaces whatever has the name, so a FIFO, a device node, a link or
// a folder there is a UserError naming it and ending with `what_to_do`.
// Writers of several files that must land together check them all before
// the first goes in.
void require_replaceable(const std::string& path,
                         const std::string& what_to_do = "name a new file or a regular one");

// Throws UserError naming the path when it cannot be written (a missing or
// read-only folder, a full disk, a file-size limit); the temporary file is
// removed and the old content of `path` is left as it was.
void write_file_atomic(const std::string& path, std::string_view content, const AtomicWriteOptions& options = {});

// Creates `dir` (and parents) and checks that files can be written there, so a
// run fails at once rather than after hours of training.
void ensure_writable_dir(const std::string& dir);

// The names and the in-flight list of temporary files live in core (every
// layer's writers use them); io's callers keep their names.
using convoy::InFlightTemporary;
using convoy::kTemporaryMark;
using convoy::remove_in_flight_temporaries;
using convoy::temporary_name;

// Removes the temporary files that writers killed in mid-write left in `dir`
// (plain files named `<name>.convoy-tmp.<pid>` of processes no longer
// running; nothing else, whatever its name). Returns how many.
int remove_stale_temporaries(const std::string& dir);

}  // namespace convoy::io
