// libFuzzer entry point: arbitrary bytes as a serialised tf.train.Example.
// Parsing may fail only with convoy::UserError; what parses must survive a
// round trip (encode → decode → encode gives the same bytes), and converting
// it to a data::Example may fail only with UserError.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/records/example_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy::records;
  ExampleProto parsed;
  try {
    parsed = decode_example(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const convoy::UserError&) {
    return 0;
  }
  for (bool packed : {true, false}) {
    const std::string once = encode_example(parsed, packed);
    if (encode_example(decode_example(once), packed) != once) std::abort();
  }
  try {
    (void)to_data_example(parsed);
  } catch (const convoy::UserError&) {
  }
  return 0;
}
