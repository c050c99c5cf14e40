// Constant folding for the ONNX import (see onnx_fold.h). Values are held as
// the decoder gives them: floats for floating-point types, int64s for
// integer and bool types; results keep the first input's data type.
#include "io/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace convoy::io::onnx_fold {
namespace {

void check_rank(std::size_t rank, const std::string& what) {
  if (rank > kMaxRank) throw FoldError(what + " would have more than " + std::to_string(kMaxRank) + " dimensions");
}

// The values a shape holds, checked before anything of that shape exists:
// at most kMaxRank dimensions, none negative, and the product of the nonzero
// ones within the cap (so every stride and partial product fits an int64,
// a 0 first or not), the whole within `budget` (what the import may still fold).
int64_t count(const std::vector<int64_t>& dims, const std::string& what = "the result", int64_t budget = kMaxFoldedValues) {
  check_rank(dims.size(), what);
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) throw FoldError(what + " has a negative dimension (" + list(dims) + ")");
    if (d == 0) empty = true;
    else if (nonzero > kMaxFoldedValues / d) throw FoldError(what + " would have more than 2^26 values");
    else nonzero *= d;
  }
  const int64_t n = empty ? 0 : nonzero;
  if (n > budget) throw FoldError(what + " would take the constants folded in this file past 2^26 values in all");
  return n;
}

// out[i] = from[base + sum over k of idx[k] * strides[k]], idx running over
// `dims` in row-major order: the strided N-d copy Slice and Transpose both are.
template <class V>
V strided_copy(const V& from, const std::vector<int64_t>& dims, int64_t base, const std::vector<int64_t>& strides) {
  const int64_t total = count(dims);
  V to(static_cast<std::size_t>(total));
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t src = base;
    for (std::size_t k = 0; k < idx.size(); ++k) src += idx[k] * strides[k];
    to[static_cast<std::size_t>(flat)] = from[static_cast<std::size_t>(src)];
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
  return to;
}

// Row-major strides of a shape count() accepted (so no product overflows).
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (std::size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

const onnx::Tensor& need(const std::vector<const onnx::Tensor*>& in, std::size_t i) {
  if (i >= in.size() || !in[i]) throw FoldError("input " + std::to_string(i) + " is missing");
  const onnx::Tensor& t = *in[i];
  count(t.dims, "constant '" + t.name + "'");
  const bool floating = onnx::is_floating(t.data_type);
  if (!floating && !onnx::is_integer(t.data_type))
    throw FoldError("constant '" + t.name + "' has data type " + onnx::data_type_name(t.data_type) + ", which convoy does not compute on");
  const std::size_t values = floating ? t.floats.size() : t.int64s.size();
  if (t.numel() < 0 || static_cast<std::size_t>(t.numel()) != values)
    throw FoldError("constant '" + t.name + "' holds " + std::to_string(values) + " values, not what its dimensions say");
  return t;
}

int64_t axis_in(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    throw FoldError("axis " + std::to_string(axis) + " is out of range for a tensor of " + std::to_string(rank) + " dimensions");
  return axis < 0 ? axis + rank : axis;
}

// Integer values from input i or, when that input is absent, attribute `name`.
std::optional<std::vector<int64_t>> ints(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, std::size_t i,
                                         const std::string& name) {
  if (i < in.size() && in[i]) {
    const onnx::Tensor& t = need(in, i);
    if (!onnx::is_integer(t.data_type)) throw FoldError("input '" + t.name + "' must hold integers");
    return t.int64s;
  }
  if (const auto* a = n.find(name)) return a->ints;
  return std::nullopt;
}

// A tensor of the same values (and type) as t, with other dimensions.
onnx::Tensor relabelled(const onnx::Tensor& t, std::vector<int64_t> dims) {
  onnx::Tensor out = t;
  out.dims = std::move(dims);
  return out;
}

// Element-wise a op b with broadcasting, on floats or on int64s.
template <class T, class Op>
std::vector<T> binary(const std::vector<T>& a, const std::vector<int64_t>& ad, const std::vector<T>& b,
                      const std::vector<int64_t>& bd, const std::vector<int64_t>& out, int64_t budget, Op op) {
  const std::size_t rank = out.size();
  const int64_t total = count(out, "the result", budget);
  // Strides of a and b in the output's index space (0 where broadcast).
  auto strides = [&](const std::vector<int64_t>& d) {
    std::vector<int64_t> s(rank, 0);
    int64_t step = 1;
    for (std::size_t k = 0; k < d.size(); ++k) {
      const std::size_t i = d.size() - 1 - k, o = rank - 1 - k;
      s[o] = d[i] == 1 ? 0 : step;
      step *= d[i];
    }
    return s;
  };
  const std::vector<int64_t> sa = strides(ad), sb = strides(bd);
  std::vector<T> result(static_cast<std::size_t>(total));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t ia = 0, ib = 0;
    for (std::size_t k = 0; k < rank; ++k) ia += idx[k] * sa[k], ib += idx[k] * sb[k];
    result[static_cast<std::size_t>(flat)] = op(a[static_cast<std::size_t>(ia)], b[static_cast<std::size_t>(ib)]);
    for (std::size_t k = rank; k-- > 0;) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  return result;
}

onnx::Tensor arithmetic(const onnx::Node& n, const onnx::Tensor& a, const onnx::Tensor& b, int64_t budget) {
  const bool fa = onnx::is_floating(a.data_type), fb = onnx::is_floating(b.data_type);
  if (fa != fb)
    throw FoldError(n.op_type + " of " + onnx::data_type_name(a.data_type) + " and " + onnx::data_type_name(b.data_type) +
                    " (ONNX takes one type)");
  const auto shape = broadcast(a.dims, b.dims);
  if (!shape) throw FoldError("shapes " + list(a.dims) + " and " + list(b.dims) + " do not broadcast");
  onnx::Tensor out{.name = n.outputs.at(0), .data_type = a.data_type, .dims = *shape};
  const std::string& op = n.op_type;
  if (fa) {
    out.floats = binary(a.floats, a.dims, b.floats, b.dims, *shape, budget, [&](float x, float y) {
      return op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    });
  } else {
    if (op == "Div" && std::find(b.int64s.begin(), b.int64s.end(), 0) != b.int64s.end())
      throw FoldError("integer division by zero");
    // Wrapping arithmetic (as ONNX Runtime's int64), without signed overflow.
    out.int64s = binary(a.int64s, a.dims, b.int64s, b.dims, *shape, budget, [&](int64_t x, int64_t y) -> int64_t {
      const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      if (op == "Add") return static_cast<int64_t>(ux + uy);
      if (op == "Sub") return static_cast<int64_t>(ux - uy);
      if (op == "Mul") return static_cast<int64_t>(ux * uy);
      return x == INT64_MIN && y == -1 ? x : x / y;
    });
  }
  return out;
}

onnx::Tensor reshape(const onnx::Node& n, const onnx::Tensor& t, const std::vector<int64_t>& target) {
  check_rank(target.size(), "the result");
  const bool allowzero = n.find("allowzero") && n.find("allowzero")->i != 0;
  std::vector<int64_t> dims = target, fixed;  // fixed: every dimension but the -1
  int64_t infer = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= t.dims.size()) throw FoldError("shape " + list(target) + " copies a dimension the input lacks");
      dims[i] = t.dims[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) throw FoldError("shape " + list(target) + " has two -1s");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (dims[i] < 0) throw FoldError("shape " + list(target) + " has a negative dimension");
    fixed.push_back(dims[i]);
  }
  const int64_t known = count(fixed, "shape " + list(target)), total = t.numel();
  if (infer >= 0) {
    if (known == 0 || total % known != 0) throw FoldError("shape " + list(target) + " does not fit " + std::to_string(total) + " values");
    dims[static_cast<std::size_t>(infer)] = total / known;
  } else if (known != total) {
    throw FoldError("shape " + list(target) + " does not fit " + std::to_string(total) + " values");
  }
  return relabelled(t, dims);
}

onnx::Tensor transpose(const onnx::Node& n, const onnx::Tensor& t) {
  const std::size_t rank = t.dims.size();
  std::vector<int64_t> perm;
  if (const auto* a = n.find("perm")) perm = a->ints;
  if (perm.empty())
    for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = sorted.size() == rank;
  for (std::size_t i = 0; valid && i < rank; ++i) valid = sorted[i] == static_cast<int64_t>(i);
  if (!valid) throw FoldError("perm " + list(perm) + " is not a permutation of the axes");
  const std::vector<int64_t> in_strides = strides_of(t.dims);
  std::vector<int64_t> dims(rank), strides(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    dims[i] = t.dims[static_cast<std::size_t>(perm[i])];
    strides[i] = in_strides[static_cast<std::size_t>(perm[i])];
  }
  onnx::Tensor out = relabelled(t, dims);
  if (onnx::is_floating(t.data_type)) out.floats = strided_copy(t.floats, dims, 0, strides);
  else out.int64s = strided_copy(t.int64s, dims, 0, strides);
  return out;
}

onnx::Tensor concat(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t budget) {
  const onnx::Tensor& first = need(in, 0);
  const int64_t rank = static_cast<int64_t>(first.dims.size());
  if (rank == 0) throw FoldError("Concat of scalars");
  const std::size_t axis = static_cast<std::size_t>(axis_in(n.find("axis") ? n.find("axis")->i : 0, rank));
  onnx::Tensor out = relabelled(first, first.dims);
  out.dims[axis] = 0;
  out.floats.clear();
  out.int64s.clear();
  int64_t outer = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= first.dims[k];
  for (std::size_t i = 0; i < in.size(); ++i) {
    const onnx::Tensor& t = need(in, i);
    bool fits = t.dims.size() == first.dims.size() && onnx::is_floating(t.data_type) == onnx::is_floating(first.data_type);
    for (std::size_t k = 0; fits && k < t.dims.size(); ++k) fits = k == axis || t.dims[k] == first.dims[k];
    if (!fits) throw FoldError("inputs " + list(first.dims) + " and " + list(t.dims) + " do not concatenate along axis " + std::to_string(axis));
    out.dims[axis] += t.dims[axis];
  }
  count(out.dims, "the result", budget);
  for (int64_t o = 0; o < outer; ++o)
    for (const onnx::Tensor* t : in) {
      const int64_t block = outer ? t->numel() / outer : 0;
      const auto b = static_cast<std::ptrdiff_t>(o * block), e = static_cast<std::ptrdiff_t>((o + 1) * block);
      if (onnx::is_floating(first.data_type)) out.floats.insert(out.floats.end(), t->floats.begin() + b, t->floats.begin() + e);
      else out.int64s.insert(out.int64s.end(), t->int64s.begin() + b, t->int64s.begin() + e);
    }
  return out;
}

// ConstantOfShape: a tensor of the shape input 0 gives, every value the
// attribute `value`'s one value (a float 0 when absent; any other attribute
// is refused, not read as 0).
onnx::Tensor constant_of_shape(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t budget) {
  const onnx::Tensor& shape = need(in, 0);
  if (!onnx::is_integer(shape.data_type) || shape.dims.size() != 1) throw FoldError("the shape must be a 1-D integer tensor");
  onnx::Tensor out{.name = n.outputs.at(0), .data_type = onnx::kFloat, .dims = shape.int64s};
  const int64_t total = count(out.dims, "the result", budget);
  float f = 0;
  int64_t i = 0;
  if (const auto* a = n.find("value")) {
    if (a->type != onnx::Attribute::kTensor || !a->t) throw FoldError("the attribute 'value' must be a tensor of one value");
    std::vector<const onnx::Tensor*> value{&*a->t};
    const onnx::Tensor& v = need(value, 0);
    if (v.numel() != 1) throw FoldError("the attribute 'value' must be a tensor of one value, not " + list(v.dims));
    out.data_type = v.data_type;
    if (onnx::is_floating(v.data_type)) f = v.floats[0];
    else i = v.int64s[0];
  }
  if (onnx::is_floating(out.data_type)) out.floats.assign(static_cast<std::size_t>(total), f);
  else out.int64s.assign(static_cast<std::size_t>(total), i);
  return out;
}

// Slice (opset 10 on: starts, ends, axes, steps as inputs; before, attributes)
// with ONNX's clamping of starts and ends, negative steps included.
onnx::Tensor slice(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t opset, int64_t budget) {
  const onnx::Tensor& t = need(in, 0);
  const int64_t rank = static_cast<int64_t>(t.dims.size());
  const bool attrs = opset < 10;
  const auto starts = ints(n, in, attrs ? in.size() : 1, "starts"), ends = ints(n, in, attrs ? in.size() : 2, "ends");
  if (!starts || !ends || starts->size() != ends->size()) throw FoldError("starts and ends must be given, one per axis");
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (auto a = ints(n, in, attrs ? in.size() : 3, "axes")) axes = *a;
  else
    for (std::size_t k = 0; k < starts->size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (!attrs)
    if (auto st = ints(n, in, 4, "")) steps = *st;
  if (axes.size() != starts->size() || steps.size() != starts->size()) throw FoldError("axes and steps must match starts");
  // Per axis: the first index and the step (the whole axis, step 1, where not sliced).
  std::vector<int64_t> first(static_cast<std::size_t>(rank), 0), step(static_cast<std::size_t>(rank), 1), dims = t.dims;
  std::set<int64_t> seen;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = axis_in(axes[k], rank);
    if (!seen.insert(axis).second) throw FoldError("axes " + list(axes) + " repeat an axis");
    const int64_t size = t.dims[static_cast<std::size_t>(axis)], st = steps[k];
    if (st == 0) throw FoldError("a step is 0");
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -size ? -1 : v + size;  // without overflow for INT64_MIN
      return std::clamp(v, lo, hi);
    };
    // An axis of size 0 slices to nothing (and has no index to clamp into).
    const int64_t b = size == 0 ? 0 : st > 0 ? clamp((*starts)[k], 0, size) : clamp((*starts)[k], 0, size - 1);
    const int64_t e = size == 0 ? 0 : st > 0 ? clamp((*ends)[k], 0, size) : clamp((*ends)[k], -1, size - 1);
    // ceil(span / |step|) for a non-empty span (at most size), as 1 + (span - 1) / |step|:
    // no overflow for steps near INT64_MAX, and |INT64_MIN| taken unsigned.
    const int64_t span = st > 0 ? e - b : b - e;
    const uint64_t magnitude = st > 0 ? static_cast<uint64_t>(st) : uint64_t{0} - static_cast<uint64_t>(st);
    const int64_t len = span > 0 ? 1 + static_cast<int64_t>(static_cast<uint64_t>(span - 1) / magnitude) : 0;
    first[static_cast<std::size_t>(axis)] = b;
    step[static_cast<std::size_t>(axis)] = st;
    dims[static_cast<std::size_t>(axis)] = len;
  }
  onnx::Tensor out = relabelled(t, dims);
  count(dims, "the result", budget);
  // Where an axis keeps two or more values its step is below its size, so
  // step * stride stays within the input; where it keeps one the step is unused.
  const std::vector<int64_t> in_strides = strides_of(t.dims);
  std::vector<int64_t> strides(static_cast<std::size_t>(rank), 0);
  int64_t base = 0;
  for (std::size_t k = 0; k < strides.size(); ++k) {
    base += first[k] * in_strides[k];
    if (dims[k] > 1) strides[k] = step[k] * in_strides[k];
  }
  if (onnx::is_floating(t.data_type)) out.floats = strided_copy(t.floats, dims, base, strides);
  else out.int64s = strided_copy(t.int64s, dims, base, strides);
  return out;
}

// Cast to the types PyTorch's pad chain casts to (INT64; INT32, FLOAT and
// DOUBLE besides), each exactly as ONNX Runtime computes it: floats to
// integers toward zero, integers to FLOAT rounded to nearest. A value the
// target cannot hold (or that the folder's floats would not keep exactly, for
// DOUBLE) and any other target (BOOL, UINT8, FLOAT16, ...) are refused.
onnx::Tensor cast(const onnx::Node& n, const onnx::Tensor& t) {
  const auto* to = n.find("to");
  if (!to) throw FoldError("the attribute 'to' is missing");
  const int64_t target = to->i;
  if (target != onnx::kInt64 && target != onnx::kInt32 && target != onnx::kFloat && target != onnx::kDouble)
    throw FoldError("a cast to " +
                    (target >= 0 && target <= INT32_MAX ? onnx::data_type_name(static_cast<int32_t>(target))
                                                        : "data type " + std::to_string(target)) +
                    ", which convoy folds only to INT64, INT32, FLOAT or DOUBLE");
  const auto type = static_cast<int32_t>(target);
  const int64_t lo = type == onnx::kInt32 ? INT32_MIN : INT64_MIN, hi = type == onnx::kInt32 ? INT32_MAX : INT64_MAX;
  auto refuse = [&](const std::string& value) {
    throw FoldError("a cast of " + value + " to " + onnx::data_type_name(type) + ", which cannot hold it exactly");
  };
  onnx::Tensor out = t;
  out.data_type = type;
  out.floats.clear();
  out.int64s.clear();
  if (onnx::is_floating(type)) {
    if (onnx::is_floating(t.data_type)) out.floats = t.floats;  // a float widens to DOUBLE exactly
    for (int64_t v : t.int64s) {
      const auto f = static_cast<float>(v);
      if (type == onnx::kDouble && static_cast<double>(f) != static_cast<double>(v)) refuse(std::to_string(v));
      out.floats.push_back(f);
    }
  } else {
    for (int64_t v : t.int64s) {
      if (v < lo || v > hi) refuse(std::to_string(v));
      out.int64s.push_back(v);
    }
    for (float v : t.floats) {
      const float whole = std::trunc(v);  // toward zero; 2^63 itself is out of range, -2^63 in
      if (!(whole >= static_cast<float>(lo) && whole < -static_cast<float>(lo)) || (type == onnx::kInt32 && whole > hi))
        refuse(std::to_string(v));
      out.int64s.push_back(static_cast<int64_t>(whole));
    }
  }
  return out;
}

}  // namespace

std::string list(const std::vector<int64_t>& v) {
  constexpr std::size_t kShown = 16;
  std::string s = "[";
  for (std::size_t i = 0; i < std::min(v.size(), kShown); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > kShown) s += ", ... (" + std::to_string(v.size()) + " values)";
  return s + "]";
}

bool folds(const std::string& op) {
  static const std::set<std::string> ops{"Identity",  "Add",       "Sub",    "Mul",   "Div",  "Reshape",
                                         "Flatten",   "Squeeze",   "Unsqueeze", "Transpose", "Concat",
                                         "ConstantOfShape", "Slice", "Cast"};
  return ops.count(op) > 0;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1, db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

onnx::Tensor fold_node(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t opset, int64_t budget) {
  const std::string& op = n.op_type;
  budget = std::min(budget, kMaxFoldedValues);
  onnx::Tensor out;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    out = arithmetic(n, need(in, 0), need(in, 1), budget);
  } else if (op == "Concat") {
    out = concat(n, in, budget);
  } else if (op == "ConstantOfShape") {
    out = constant_of_shape(n, in, budget);
  } else if (op == "Slice") {
    out = slice(n, in, opset, budget);
  } else {
    const onnx::Tensor& t = need(in, 0);
    count(t.dims, "the result", budget);  // the ops below keep the input's values (copied)
    const int64_t rank = static_cast<int64_t>(t.dims.size());
    if (op == "Cast") {
      out = cast(n, t);
    } else if (op == "Identity") {

      out = t;
    } else if (op == "Reshape") {
      out = reshape(n, t, *ints(n, in, 1, "shape"));
    } else if (op == "Flatten") {
      const int64_t axis = n.find("axis") ? n.find("axis")->i : 1;
      const int64_t a = axis == rank ? rank : axis_in(axis, rank);
      int64_t lead = 1;
      for (int64_t k = 0; k < a; ++k) lead *= t.dims[static_cast<std::size_t>(k)];
      out = relabelled(t, {lead, lead ? t.numel() / lead : 0});
    } else if (op == "Transpose") {
      out = transpose(n, t);
    } else {  // Squeeze, Unsqueeze: axes as an input from opset 13, an attribute before
      const auto axes = ints(n, in, 1, opset >= 13 ? std::string{} : std::string("axes"));
      std::vector<int64_t> dims = t.dims;
      if (op == "Squeeze") {
        std::set<int64_t> drop;
        if (axes) {
          for (int64_t a : *axes) drop.insert(axis_in(a, rank));
        } else {
          for (int64_t k = 0; k < rank; ++k)
            if (dims[static_cast<std::size_t>(k)] == 1) drop.insert(k);
        }
        std::vector<int64_t> kept;
        for (int64_t k = 0; k < rank; ++k) {
          if (!drop.count(k)) kept.push_back(dims[static_cast<std::size_t>(k)]);
          else if (dims[static_cast<std::size_t>(k)] != 1) throw FoldError("axis " + std::to_string(k) + " has size " + std::to_string(dims[static_cast<std::size_t>(k)]) + ", not 1");
        }
        dims = kept;
      } else {
        if (!axes) throw FoldError("the axes are missing");
        const int64_t out_rank = rank + static_cast<int64_t>(axes->size());
        check_rank(static_cast<std::size_t>(out_rank), "the result");
        std::set<int64_t> at;
        for (int64_t a : *axes)
          if (!at.insert(axis_in(a, out_rank)).second) throw FoldError("axes " + list(*axes) + " repeat an axis");
        dims.clear();
        std::size_t next = 0;
        for (int64_t k = 0; k < out_rank; ++k) dims.push_back(at.count(k) ? 1 : t.dims[next++]);
      }
      out = relabelled(t, dims);
    }
  }
  out.name = n.outputs.at(0);
  return out;
}

}  // namespace convoy::io::onnx_fold
