// Run configs in JSON: parse_run_config returns a checked config or throws
// UserError naming the key.
#include <cstdint>
#include <string>

#include "convoy/core/error.h"
#include "convoy/config/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto c = convoy::train::parse_run_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json",
                                                   /*yaml=*/false);
    convoy::train::run_config_json(c);  // what checkpoints store must print
  } catch (const convoy::UserError&) {
  }
  return 0;
}
