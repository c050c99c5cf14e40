#include "convoy/app/export.h"

#include <filesystem>
#include <fstream>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"
#include "convoy/app/run_checkpoint.h"

namespace convoy::train {

ExportSummary export_checkpoint_onnx(const std::string& dir, const std::string& onnx_path,
                                     const io::OnnxExportOptions& options, std::ostream& warn) {
  // Checked before the checkpoint loads: "" would fail only at the write, and
  // "-" would become a file named "-" where `predict --output -` means the pipe.
  require(!onnx_path.empty(), "--onnx: the path is empty; name the ONNX file to write, e.g. --onnx model.onnx");
  require(onnx_path != "-", "--onnx -: export writes a file, not standard output; name the ONNX file to write, "
                            "e.g. --onnx model.onnx");
  const RunCheckpoint ck = load_latest_checkpoint(dir, warn);
  // The model as `convoy evaluate` rebuilds it: from the run's config, on its data's shape.
  const nn::Model model = build_model(ck.config, model_input_shape(ck.config), model_classes(ck.config));
  const io::onnx::Model onnx = io::to_onnx(model, ck.params, ck.state, options);
  const std::string bytes = io::onnx::encode(onnx);
  // An existing file is replaced only when it is an ONNX model (one opens with its ir_version, field 1:
  // byte 0x08): `--onnx DIR/model.safetensors` would destroy the run's weights.
  std::error_code ec;  // not followed: a link, like any special file, is the write's to refuse
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(onnx_path, ec))) {
    std::ifstream in(onnx_path, std::ios::binary);
    const int first = in.get();
    require(first == std::char_traits<char>::eof() || first == 0x08,
            "--onnx " + shown(onnx_path, 160) + ": exists and is not an ONNX model; name a new file, or remove it first");
  }
  io::write_file_atomic(onnx_path, bytes);
  return {static_cast<int64_t>(onnx.graph.nodes.size()), static_cast<int64_t>(onnx.graph.initializers.size()),
          static_cast<int64_t>(bytes.size())};
}

}  // namespace convoy::train
