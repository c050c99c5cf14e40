#pragma once
// Models out and in as ONNX (opset 13), written and read by convoy's own
// protobuf code (onnx_proto.h), no onnx library.
//
// Out: the inference graph of a model and its weights: dropout left out,
// batch norms folded into the convolution before them (optionally kept as
// BatchNormalization), input "input" [N, C, H, W] with a free batch size N,
// output "output" [N, classes]. ONNX Runtime and OpenCV's dnn module run it.
//
// In: a CNN exported to ONNX (by PyTorch, tf2onnx, or convoy) becomes a
// trainable nn::Model with its weights, for the ops the zoo uses: Conv
// (groups too), BatchNormalization, Relu, Clip (0..6, 0..inf or none), Sigmoid,
// Mul, Add, Concat, MaxPool, AveragePool, GlobalAveragePool, Flatten,
// Reshape to [N, -1], Gemm, MatMul (+ Add of a bias), LogSoftmax, Dropout,
// Identity, Constant; and what TensorFlow's exporter adds around them: an
// NHWC input and its Transposes, zero Pads (folded into the next Conv or
// pool), ReduceMean over H and W, Squeeze of 1x1 axes, a final Softmax (left
// out); and Unsqueeze of a channel gate, as convoy's export writes it.
// Chains of constants fold (io/onnx_fold.h), PyTorch's computation of a
// Pad's pads (ConstantOfShape, Slice, Cast ...) among them.
// One FLOAT input; initializers of any ONNX element type. Anything else is
// one UserError naming the op and node (docs/zoo.md), an unnamed node by its
// index ("node #3 (Concat)"). tests/test_onnx_conformance.cpp holds the import
// to ONNX's own backend node tests.
#include <span>
#include <string>

#include "convoy/io/model_weights.h"
#include "convoy/io/onnx_proto.h"
#include "convoy/nn/model.h"

namespace convoy::io {

struct OnnxExportOptions {
  bool fold_batch_norm = true;  // false: BatchNormalization nodes of their own
};

// The ONNX model of `model` with these parameters and state (its flat buffers).
onnx::Model to_onnx(const nn::Model& model, std::span<const float> params, std::span<const float> state,
                    const OnnxExportOptions& options = {});
// Writes it to `path` atomically.
void export_onnx(const std::string& path, const nn::Model& model, std::span<const float> params,
                 std::span<const float> state, const OnnxExportOptions& options = {});

struct ImportedModel {
  nn::Model model;
  FlatWeights weights;
  // The file took NHWC images ([N, H, W, C], TensorFlow's layout) and
  // transposed them to NCHW; the model takes NCHW, as every convoy model.
  bool input_was_nhwc = false;
  // The file ended in a Softmax, which is left out: the model outputs the
  // logits (train with softmax cross-entropy; softmax gives the file's output).
  bool softmax_dropped = false;
};
// Throws UserError naming `where` (and the node) for a malformed file or an
// op, attribute or layout convoy cannot express.
ImportedModel from_onnx(const onnx::Model& onnx, const std::string& where);
ImportedModel load_onnx(const std::string& path);

}  // namespace convoy::io
