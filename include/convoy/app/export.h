#pragma once
// `convoy export`: a trained run's model as ONNX (io/onnx.h).
#include <iosfwd>
#include <string>

#include "convoy/io/onnx.h"

namespace convoy::train {

struct ExportSummary {
  int64_t nodes = 0, initializers = 0, bytes = 0;
};

// Writes the inference graph of the newest usable checkpoint in the run
// folder `dir` (see load_latest_checkpoint; warnings go to `warn`) to
// `onnx_path`, atomically.
ExportSummary export_checkpoint_onnx(const std::string& dir, const std::string& onnx_path,
                                     const io::OnnxExportOptions& options, std::ostream& warn);

}  // namespace convoy::train
