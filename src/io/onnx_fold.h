#pragma once
// Constant folding for the ONNX import: a node whose inputs are all
// constants (initializers, Constant nodes, nodes folded before it) computes
// a constant, here, as ONNX defines the op. Exporters write such chains
// around weights and shapes (a Transpose of a weight before a MatMul, a
// Reshape of a bias, Sub and Div of normalisation constants); folding them
// leaves the importer only "computed tensor op constant" to turn into layers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "convoy/io/onnx.h"

namespace convoy::io::onnx_fold {

// Why a node cannot be folded, without the node's name (the importer adds it).
struct FoldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The most values a folded constant may have: folding never allocates more
// than the file could plausibly mean (a hostile [2^20] + [2^20, 1] is refused).
// The same bound holds for all of one import's folds together (fold_node's
// `budget`): eight folds of 2^26 values each are refused as one would be.
inline constexpr int64_t kMaxFoldedValues = int64_t{1} << 26;

// The most dimensions a folded constant may have (as the importer's Reshape
// and Unsqueeze): a shape of 60,000 ones would make every later fold slow.
inline constexpr std::size_t kMaxRank = 64;

// The ops fold_node computes: Identity, Add, Sub, Mul, Div, Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Concat; and ConstantOfShape, Slice and Cast,
// which PyTorch's export of a pad (F.pad, nn.ZeroPad2d: TensorFlow's "same"
// in ported models) computes its pads with.
bool folds(const std::string& op_type);

// Node n's first output from its inputs (nullptr where an optional input is
// absent); `opset` picks where axes come from (attribute or input). `budget`:
// the values the import's folds may still hold (kMaxFoldedValues less what
// earlier folds made); a result above it is refused before it is allocated.
// Throws FoldError when the inputs do not fit the op.
onnx::Tensor fold_node(const onnx::Node& n, const std::vector<const onnx::Tensor*>& inputs, int64_t opset,
                       int64_t budget = kMaxFoldedValues);

// "[1, 2, 3]" for dimensions, axes or shapes in messages; at most 16 shown
// (a file may claim a million dimensions of size 1).
std::string list(const std::vector<int64_t>& values);

// The shape two shapes broadcast to under ONNX's (numpy's) rules, or nullopt.
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace convoy::io::onnx_fold
