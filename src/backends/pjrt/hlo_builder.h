#pragma once
// A small writer of StableHLO as MLIR text (the generic op form, which every
// StableHLO version parses the same way): values are SSA names with a static
// shape and an element type; each method appends one op to the function body
// and returns its result. Shapes include every dimension (batch too).
//
// Only what convoy's layers need; nothing is checked here that the plugin's
// verifier checks anyway (a wrong shape fails compilation with XLA's message).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::pjrt {

struct Val {
  std::string name;       // "%7", "%arg0"
  Shape shape;            // empty: a scalar
  std::string elem = "f32";  // f32, i32, i1
  std::string type() const;  // "tensor<2x3xf32>"
};

// Padding of one spatial axis: (before, after).
using Pads = std::vector<std::pair<int64_t, int64_t>>;

class HloBuilder {
 public:
  // Function arguments are named by the caller (%arg0...) and passed in.
  std::string body() const { return body_; }
  // Starts a new function body (value names from %v0 again).
  void clear() {
    body_.clear();
    next_ = 0;
  }

  Val constant(double value, const Shape& shape = {}, const std::string& elem = "f32");
  Val iota(const Shape& shape, int64_t dim, const std::string& elem = "i32");

  Val unary(const std::string& op, const Val& x);  // "exponential", "log", "sqrt", "rsqrt", "negate", "logistic", "abs"
  Val binary(const std::string& op, const Val& a, const Val& b);  // "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "and"
  Val add(const Val& a, const Val& b) { return binary("add", a, b); }
  Val sub(const Val& a, const Val& b) { return binary("subtract", a, b); }
  Val mul(const Val& a, const Val& b) { return binary("multiply", a, b); }
  Val div(const Val& a, const Val& b) { return binary("divide", a, b); }
  Val max(const Val& a, const Val& b) { return binary("maximum", a, b); }
  Val min(const Val& a, const Val& b) { return binary("minimum", a, b); }
  // direction: EQ, NE, LT, LE, GT, GE; result i1.
  Val compare(const Val& a, const Val& b, const std::string& direction);
  Val select(const Val& pred, const Val& on_true, const Val& on_false);
  Val convert(const Val& x, const std::string& elem);
  Val is_finite(const Val& x);

  // x broadcast to `shape`, x's dimension k going to dims[k].
  Val broadcast(const Val& x, const Shape& shape, const std::vector<int64_t>& dims);
  // A scalar (or a value) to a full shape of its own element type.
  Val splat(const Val& scalar, const Shape& shape) { return broadcast(scalar, shape, {}); }
  Val splat(double value, const Shape& shape, const std::string& elem = "f32") { return constant(value, shape, elem); }
  Val reshape(const Val& x, const Shape& shape);
  Val transpose(const Val& x, const std::vector<int64_t>& perm);
  Val slice(const Val& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
            const std::vector<int64_t>& strides = {});
  Val concatenate(const std::vector<Val>& parts, int64_t dim);
  Val reverse(const Val& x, const std::vector<int64_t>& dims);
  // Edge and interior padding with a scalar value, per dimension.
  Val pad(const Val& x, const Val& value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
          const std::vector<int64_t>& interior);

  // Reductions over `dims` with "add", "maximum", "minimum" or "and" from `init`.
  Val reduce(const Val& x, const std::string& op, double init, const std::vector<int64_t>& dims);
  Val sum(const Val& x, const std::vector<int64_t>& dims) { return reduce(x, "add", 0, dims); }
  // The element-wise sum over `replicas` replicas of the program (one group
  // of all of them): every replica gets the same result.
  Val all_reduce_sum(const Val& x, int64_t replicas);
  Val reduce_window(const Val& x, const std::string& op, double init, const std::vector<int64_t>& window,
                    const std::vector<int64_t>& strides, const std::vector<std::pair<int64_t, int64_t>>& padding);
  // Max pooling's backward: each window's gradient goes to its first maximum.
  Val select_and_scatter_max(const Val& operand, const Val& source, const std::vector<int64_t>& window,
                             const std::vector<int64_t>& strides);

  // NCHW x OIHW -> NCHW, or with other dimension numbers (e.g. "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]").
  Val convolution(const Val& lhs, const Val& rhs, const Shape& out, const std::string& dim_numbers,
                  const std::vector<int64_t>& strides, const Pads& padding, const std::vector<int64_t>& lhs_dilation,
                  const std::vector<int64_t>& rhs_dilation, int64_t feature_groups, int64_t batch_groups);
  // No batch dimensions; contracting lhs_c with rhs_c.
  Val dot(const Val& lhs, const Val& rhs, int64_t lhs_c, int64_t rhs_c);

  std::string fresh() { return "%v" + std::to_string(next_++); }
  void line(const std::string& text) { body_ += "    " + text + "\n"; }

 private:
  Val emit(const std::string& op, const std::vector<Val>& operands, const std::string& attrs, const Shape& shape,
           const std::string& elem);
  std::string region(const std::string& op, const std::string& elem);  // ^bb0(a, b): op(a, b); return

  std::string body_;
  int next_ = 0;
};

std::string type_list(const std::vector<Val>& vals);
std::string i64_array(const std::vector<int64_t>& v);  // "array<i64: 1, 2>"

}  // namespace convoy::pjrt
