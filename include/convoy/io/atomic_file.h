#pragma once
// Outputs are never half-written: content goes to a temporary file beside the
// target, is flushed to disk, then renamed over it in one step.
#include <string>
#include <string_view>

namespace convoy::io {

// Throws UserError naming the path when it cannot be written.
void write_file_atomic(const std::string& path, std::string_view content);

// Creates `dir` (and parents) and checks that files can be written there, so a
// run fails at once rather than after hours of training.
void ensure_writable_dir(const std::string& dir);

}  // namespace convoy::io
