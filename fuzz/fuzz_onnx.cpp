// libFuzzer entry point: arbitrary bytes as an ONNX model file. Decoding and
// importing may fail only with convoy::UserError. What imports must export
// again, and that export must decode and import to a model of the same size:
// convoy writes nothing it cannot read back.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/io/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convoy::io;
  std::optional<ImportedModel> parsed;
  try {
    parsed = from_onnx(onnx::decode(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz"), "fuzz");
  } catch (const convoy::UserError&) {
    return 0;
  }
  const ImportedModel& imported = *parsed;
  const std::string again = onnx::encode(to_onnx(imported.model, imported.weights.params, imported.weights.state,
                                                 {.fold_batch_norm = false}));
  const ImportedModel back = from_onnx(onnx::decode(again, "fuzz re-export"), "fuzz re-export");
  if (back.model.num_parameters() != imported.model.num_parameters() ||
      back.model.output_shape() != imported.model.output_shape())
    std::abort();
  return 0;
}
