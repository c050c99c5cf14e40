// Constant folding for the ONNX import (see onnx_fold.h). Values are held as
// the decoder gives them: floats for floating-point types, int64s for
// integer and bool types; results keep the first input's data type.
#include "io/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace convoy::io::onnx_fold {
namespace {

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxFoldedValues / d)) throw FoldError("the result would have more than 2^26 values");
    n *= d;
  }
  return n;
}

const onnx::Tensor& need(const std::vector<const onnx::Tensor*>& in, std::size_t i) {
  if (i >= in.size() || !in[i]) throw FoldError("input " + std::to_string(i) + " is missing");
  const onnx::Tensor& t = *in[i];
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
                      const std::vector<int64_t>& bd, const std::vector<int64_t>& out, Op op) {
  const std::size_t rank = out.size();
  const int64_t total = count(out);
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

onnx::Tensor arithmetic(const onnx::Node& n, const onnx::Tensor& a, const onnx::Tensor& b) {
  const bool fa = onnx::is_floating(a.data_type), fb = onnx::is_floating(b.data_type);
  if (fa != fb)
    throw FoldError(n.op_type + " of " + onnx::data_type_name(a.data_type) + " and " + onnx::data_type_name(b.data_type) +
                    " (ONNX takes one type)");
  const auto shape = broadcast(a.dims, b.dims);
  if (!shape) throw FoldError("shapes " + list(a.dims) + " and " + list(b.dims) + " do not broadcast");
  onnx::Tensor out{.name = n.outputs.at(0), .data_type = a.data_type, .dims = *shape};
  const std::string& op = n.op_type;
  if (fa) {
    out.floats = binary(a.floats, a.dims, b.floats, b.dims, *shape, [&](float x, float y) {
      return op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    });
  } else {
    if (op == "Div" && std::find(b.int64s.begin(), b.int64s.end(), 0) != b.int64s.end())
      throw FoldError("integer division by zero");
    // Wrapping arithmetic (as ONNX Runtime's int64), without signed overflow.
    out.int64s = binary(a.int64s, a.dims, b.int64s, b.dims, *shape, [&](int64_t x, int64_t y) -> int64_t {
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
  if (target.size() > 64) throw FoldError("the shape has more than 64 dimensions");
  const bool allowzero = n.find("allowzero") && n.find("allowzero")->i != 0;
  std::vector<int64_t> dims = target;
  int64_t known = 1, infer = -1;
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
    known *= dims[i];
    count({known});
  }
  const int64_t total = t.numel();
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
  std::vector<int64_t> dims(rank), in_strides(rank, 1);
  for (std::size_t k = rank; k-- > 1;) in_strides[k - 1] = in_strides[k] * t.dims[k];
  for (std::size_t i = 0; i < rank; ++i) dims[i] = t.dims[static_cast<std::size_t>(perm[i])];
  onnx::Tensor out = relabelled(t, dims);
  const int64_t total = t.numel();
  auto move = [&](auto& to, const auto& from) {
    std::vector<int64_t> idx(rank, 0);
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t src = 0;
      for (std::size_t i = 0; i < rank; ++i) src += idx[i] * in_strides[static_cast<std::size_t>(perm[i])];
      to[static_cast<std::size_t>(flat)] = from[static_cast<std::size_t>(src)];
      for (std::size_t k = rank; k-- > 0;) {
        if (++idx[k] < dims[k]) break;
        idx[k] = 0;
      }
    }
  };
  if (onnx::is_floating(t.data_type)) move(out.floats, t.floats);
  else move(out.int64s, t.int64s);
  return out;
}

onnx::Tensor concat(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in) {
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
  count(out.dims);
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
// attribute `value`'s one value (a float 0 when absent).
onnx::Tensor constant_of_shape(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in) {
  const onnx::Tensor& shape = need(in, 0);
  if (!onnx::is_integer(shape.data_type) || shape.dims.size() != 1) throw FoldError("the shape must be a 1-D integer tensor");
  onnx::Tensor out{.name = n.outputs.at(0), .data_type = onnx::kFloat, .dims = shape.int64s};
  const int64_t total = count(out.dims);
  float f = 0;
  int64_t i = 0;
  if (const auto* a = n.find("value"); a && a->t) {
    std::vector<const onnx::Tensor*> value{&*a->t};
    const onnx::Tensor& v = need(value, 0);
    if (v.numel() != 1) throw FoldError("'value' must hold one value");
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
onnx::Tensor slice(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t opset) {
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
    const int64_t b = st > 0 ? clamp((*starts)[k], 0, size) : clamp((*starts)[k], 0, size - 1);
    const int64_t e = st > 0 ? clamp((*ends)[k], 0, size) : clamp((*ends)[k], -1, size - 1);
    const int64_t len = st > 0 ? (e > b ? (e - b + st - 1) / st : 0) : (b > e ? (b - e + (-st) - 1) / (-st) : 0);
    first[static_cast<std::size_t>(axis)] = b;
    step[static_cast<std::size_t>(axis)] = st;
    dims[static_cast<std::size_t>(axis)] = len;
  }
  onnx::Tensor out = relabelled(t, dims);
  const int64_t total = count(dims);
  std::vector<int64_t> in_strides(static_cast<std::size_t>(rank), 1);
  for (int64_t k = rank; k-- > 1;) in_strides[static_cast<std::size_t>(k - 1)] = in_strides[static_cast<std::size_t>(k)] * t.dims[static_cast<std::size_t>(k)];
  auto gather = [&](auto& to, const auto& from) {
    to.resize(static_cast<std::size_t>(total));
    std::vector<int64_t> idx(static_cast<std::size_t>(rank), 0);
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t src = 0;
      for (std::size_t k = 0; k < idx.size(); ++k) src += (first[k] + idx[k] * step[k]) * in_strides[k];
      to[static_cast<std::size_t>(flat)] = from[static_cast<std::size_t>(src)];
      for (std::size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < dims[k]) break;
        idx[k] = 0;
      }
    }
  };
  if (onnx::is_floating(t.data_type)) gather(out.floats, t.floats);
  else gather(out.int64s, t.int64s);
  return out;
}

// Cast between the types the import computes on: floats <-> integers
// (toward zero, as ONNX Runtime), or a relabelling within one kind.
onnx::Tensor cast(const onnx::Node& n, const onnx::Tensor& t) {
  const auto* to = n.find("to");
  if (!to) throw FoldError("the attribute 'to' is missing");
  const auto type = static_cast<int32_t>(to->i);
  if (!onnx::is_floating(type) && !onnx::is_integer(type))
    throw FoldError("a cast to " + onnx::data_type_name(type) + ", which convoy does not compute on");
  onnx::Tensor out = t;
  out.data_type = type;
  if (onnx::is_floating(type) && !onnx::is_floating(t.data_type)) {
    out.int64s.clear();
    for (int64_t v : t.int64s) out.floats.push_back(static_cast<float>(v));
  } else if (onnx::is_integer(type) && onnx::is_floating(t.data_type)) {
    out.floats.clear();
    for (float v : t.floats) {
      if (!(std::abs(v) < 9.2e18f)) throw FoldError("a cast of " + std::to_string(v) + " to an integer");
      out.int64s.push_back(static_cast<int64_t>(v));
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

onnx::Tensor fold_node(const onnx::Node& n, const std::vector<const onnx::Tensor*>& in, int64_t opset) {
  const std::string& op = n.op_type;
  onnx::Tensor out;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    out = arithmetic(n, need(in, 0), need(in, 1));
  } else if (op == "Concat") {
    out = concat(n, in);
  } else if (op == "ConstantOfShape") {
    out = constant_of_shape(n, in);
  } else if (op == "Slice") {
    out = slice(n, in, opset);
  } else if (op == "Cast") {
    out = cast(n, need(in, 0));
  } else {
    const onnx::Tensor& t = need(in, 0);
    const int64_t rank = static_cast<int64_t>(t.dims.size());
    if (op == "Identity") {
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
        if (out_rank > 64) throw FoldError("the result would have more than 64 dimensions");
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
