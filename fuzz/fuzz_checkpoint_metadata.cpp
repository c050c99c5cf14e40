// Checkpoint metadata (format, position, config, history): the input is
// key NUL value NUL ... pairs, so mutations reach the JSON inside the values.
// parse_checkpoint_metadata returns a position that fits its history, or
// throws UserError.
#include <cstdint>
#include <string>

#include "convoy/core/error.h"
#include "convoy/app/run_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::io::Metadata meta;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t key_end = text.find('\0', at);
    if (key_end == std::string::npos) break;
    std::size_t value_end = text.find('\0', key_end + 1);
    if (value_end == std::string::npos) value_end = text.size();
    meta[text.substr(at, key_end - at)] = text.substr(key_end + 1, value_end - key_end - 1);
    at = value_end + 1;
  }
  try {
    const convoy::train::RunCheckpoint c = convoy::train::parse_checkpoint_metadata(meta, "fuzz");
    if (c.epoch < 0 || c.progress.step < 0 || c.progress.metrics.correct > c.progress.metrics.count) __builtin_trap();
  } catch (const convoy::UserError&) {
  }
  return 0;
}
