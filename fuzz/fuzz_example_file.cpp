// The on-disk cache file (Dataset::cache(path), data/example_file.h), which a
// later run reads back: ExampleReader must return examples whose data the file
// holds, or throw UserError, never crash or allocate what the file cannot hold.
#include <cstdint>

#include "convoy/core/error.h"
#include "data/example_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = convoy::fuzz::input_file(data, size, ".cache");
  try {
    convoy::data::ExampleReader reader(path);
    std::size_t total = 0;
    while (const auto e = reader.next()) {
      for (const auto& feature : e->tensors()) total += feature.second.nbytes();
      for (const auto& feature : e->text_features())
        for (const auto& s : feature.second) total += s.size();
      if (total > size) __builtin_trap();  // more data than the file holds
    }
  } catch (const convoy::UserError&) {
  }
  return 0;
}
