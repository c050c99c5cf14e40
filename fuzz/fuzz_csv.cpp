// libFuzzer entry point: arbitrary bytes as CSV text. Parsing may fail only
// with convoy::UserError; every record it returns has at least one field and
// starts on a line no earlier than the one before it.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/records/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto records =
        convoy::records::parse_csv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv");
    int64_t line = 0;
    for (const auto& r : records) {
      if (r.fields.empty() || r.line <= line) std::abort();
      line = r.line;
    }
  } catch (const convoy::UserError&) {
  }
  return 0;
}
