#include "convoy/app/export.h"

#include "convoy/io/atomic_file.h"
#include "convoy/app/run_checkpoint.h"

namespace convoy::train {

ExportSummary export_checkpoint_onnx(const std::string& dir, const std::string& onnx_path,
                                     const io::OnnxExportOptions& options, std::ostream& warn) {
  const RunCheckpoint ck = load_latest_checkpoint(dir, warn);
  // The model as `convoy evaluate` rebuilds it: from the run's config, on its data's shape.
  const nn::Model model = build_model(ck.config, model_input_shape(ck.config), model_classes(ck.config));
  const io::onnx::Model onnx = io::to_onnx(model, ck.params, ck.state, options);
  const std::string bytes = io::onnx::encode(onnx);
  io::write_file_atomic(onnx_path, bytes);
  return {static_cast<int64_t>(onnx.graph.nodes.size()), static_cast<int64_t>(onnx.graph.initializers.size()),
          static_cast<int64_t>(bytes.size())};
}

}  // namespace convoy::train
