// StableHLO text, one op per line: see hlo_builder.h.
#include "backends/pjrt/hlo_builder.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <stdexcept>

namespace convoy::pjrt {
namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// A float constant as its bit pattern: exact, so a constant in the program
// is the very float the CPU backend computes with (0.1f, 1 / (1 - rate), ...).
std::string literal(double value, const std::string& elem) {
  if (elem == "i1") return value != 0 ? "true" : "false";
  if (elem == "f64") {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%016llX", static_cast<unsigned long long>(std::bit_cast<uint64_t>(value)));
    return hex;
  }
  if (elem != "f32") return std::to_string(static_cast<int64_t>(value));
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08X", std::bit_cast<uint32_t>(static_cast<float>(value)));
  return hex;
}

// Plain fp32 products, never TF32 or bf16 passes (XLA's GPU default for
// f32 on recent GPUs): results comparable with the CPU backend's.
constexpr const char* kFullPrecision =
    "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";

std::string pads_attr(const std::vector<std::pair<int64_t, int64_t>>& p) {
  std::string s = "dense<[";
  for (std::size_t i = 0; i < p.size(); ++i)
    s += (i ? ", [" : "[") + std::to_string(p[i].first) + ", " + std::to_string(p[i].second) + "]";
  return s + "]> : tensor<" + std::to_string(p.size()) + "x2xi64>";
}

}  // namespace

std::string Val::type() const {
  std::string t = "tensor<";
  for (int64_t d : shape) t += std::to_string(d) + "x";
  return t + elem + ">";
}

std::string type_list(const std::vector<Val>& vals) {
  std::string s;
  for (std::size_t i = 0; i < vals.size(); ++i) s += (i ? ", " : "") + vals[i].type();
  return s;
}

std::string i64_array(const std::vector<int64_t>& v) { return v.empty() ? "array<i64>" : "array<i64: " + join(v) + ">"; }

Val HloBuilder::emit(const std::string& op, const std::vector<Val>& operands, const std::string& attrs,
                     const Shape& shape, const std::string& elem) {
  Val r{fresh(), shape, elem};
  std::string names;
  for (std::size_t i = 0; i < operands.size(); ++i) names += (i ? ", " : "") + operands[i].name;
  line(r.name + " = \"stablehlo." + op + "\"(" + names + ")" + (attrs.empty() ? "" : " {" + attrs + "}") + " : (" +
       type_list(operands) + ") -> " + r.type());
  return r;
}

std::string HloBuilder::region(const std::string& op, const std::string& elem) {
  const Val a{fresh(), {}, elem}, b{fresh(), {}, elem};
  const std::string r = fresh();
  return "^bb0(" + a.name + ": " + a.type() + ", " + b.name + ": " + b.type() + "):\n      " + r +
         " = \"stablehlo." + op + "\"(" + a.name + ", " + b.name + ") : (" + a.type() + ", " + b.type() + ") -> " +
         a.type() + "\n      \"stablehlo.return\"(" + r + ") : (" + a.type() + ") -> ()\n    ";
}

Val HloBuilder::constant(double value, const Shape& shape, const std::string& elem) {
  Val r{fresh(), shape, elem};
  line(r.name + " = stablehlo.constant dense<" + literal(value, elem) + "> : " + r.type());
  return r;
}

Val HloBuilder::iota(const Shape& shape, int64_t dim, const std::string& elem) {
  return emit("iota", {}, "iota_dimension = " + std::to_string(dim) + " : i64", shape, elem);
}

Val HloBuilder::unary(const std::string& op, const Val& x) { return emit(op, {x}, "", x.shape, x.elem); }

Val HloBuilder::binary(const std::string& op, const Val& a, const Val& b) {
  if (a.shape != b.shape) throw std::logic_error("stablehlo." + op + ": " + a.type() + " vs " + b.type());
  return emit(op, {a, b}, "", a.shape, a.elem);
}

Val HloBuilder::compare(const Val& a, const Val& b, const std::string& direction) {
  return emit("compare", {a, b}, "comparison_direction = #stablehlo<comparison_direction " + direction + ">",
              a.shape, "i1");
}

Val HloBuilder::select(const Val& pred, const Val& t, const Val& f) { return emit("select", {pred, t, f}, "", t.shape, t.elem); }

Val HloBuilder::convert(const Val& x, const std::string& elem) { return emit("convert", {x}, "", x.shape, elem); }

Val HloBuilder::is_finite(const Val& x) { return emit("is_finite", {x}, "", x.shape, "i1"); }

Val HloBuilder::broadcast(const Val& x, const Shape& shape, const std::vector<int64_t>& dims) {
  return emit("broadcast_in_dim", {x}, "broadcast_dimensions = " + i64_array(dims), shape, x.elem);
}

Val HloBuilder::reshape(const Val& x, const Shape& shape) { return emit("reshape", {x}, "", shape, x.elem); }

Val HloBuilder::transpose(const Val& x, const std::vector<int64_t>& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  return emit("transpose", {x}, "permutation = " + i64_array(perm), out, x.elem);
}

Val HloBuilder::slice(const Val& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                      const std::vector<int64_t>& strides_in) {
  std::vector<int64_t> strides = strides_in.empty() ? std::vector<int64_t>(start.size(), 1) : strides_in;
  Shape out;
  for (std::size_t i = 0; i < start.size(); ++i) out.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  return emit("slice", {x},
              "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                  ", strides = " + i64_array(strides),
              out, x.elem);
}

Val HloBuilder::concatenate(const std::vector<Val>& parts, int64_t dim) {
  if (parts.size() == 1) return parts[0];
  Shape out = parts[0].shape;
  for (std::size_t i = 1; i < parts.size(); ++i) out[dim] += parts[i].shape[dim];
  return emit("concatenate", parts, "dimension = " + std::to_string(dim) + " : i64", out, parts[0].elem);
}

Val HloBuilder::reverse(const Val& x, const std::vector<int64_t>& dims) {
  return emit("reverse", {x}, "dimensions = " + i64_array(dims), x.shape, x.elem);
}

Val HloBuilder::pad(const Val& x, const Val& value, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
                    const std::vector<int64_t>& interior) {
  Shape out = x.shape;
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = low[i] + high[i] + x.shape[i] + (x.shape[i] > 0 ? (x.shape[i] - 1) * interior[i] : 0);
  return emit("pad", {x, value},
              "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                  ", interior_padding = " + i64_array(interior),
              out, x.elem);
}

Val HloBuilder::reduce(const Val& x, const std::string& op, double init, const std::vector<int64_t>& dims) {
  const Val start = constant(init, {}, x.elem);
  Shape out;
  for (std::size_t i = 0; i < x.shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end()) out.push_back(x.shape[i]);
  Val r{fresh(), out, x.elem};
  line(r.name + " = \"stablehlo.reduce\"(" + x.name + ", " + start.name + ") ({\n    " + region(op, x.elem) +
       "}) {dimensions = " + i64_array(dims) + "} : (" + x.type() + ", " + start.type() + ") -> " + r.type());
  return r;
}

Val HloBuilder::all_reduce_sum(const Val& x, int64_t replicas) {
  std::vector<int64_t> all(replicas);
  for (int64_t r = 0; r < replicas; ++r) all[r] = r;
  Val r{fresh(), x.shape, x.elem};
  // No channel handle: a cross-replica all-reduce (replica ids, one partition).
  line(r.name + " = \"stablehlo.all_reduce\"(" + x.name + ") ({\n    " + region("add", x.elem) +
       "}) {replica_groups = dense<[[" + join(all) + "]]> : tensor<1x" + std::to_string(replicas) + "xi64>} : (" +
       x.type() + ") -> " + r.type());
  return r;
}

Val HloBuilder::reduce_window(const Val& x, const std::string& op, double init, const std::vector<int64_t>& window,
                              const std::vector<int64_t>& strides,
                              const std::vector<std::pair<int64_t, int64_t>>& padding) {
  const Val start = constant(init, {}, x.elem);
  Shape out;
  for (std::size_t i = 0; i < x.shape.size(); ++i)
    out.push_back((x.shape[i] + padding[i].first + padding[i].second - window[i]) / strides[i] + 1);
  Val r{fresh(), out, x.elem};
  line(r.name + " = \"stablehlo.reduce_window\"(" + x.name + ", " + start.name + ") ({\n    " + region(op, x.elem) +
       "}) {window_dimensions = " + i64_array(window) + ", window_strides = " + i64_array(strides) +
       ", padding = " + pads_attr(padding) + "} : (" + x.type() + ", " + start.type() + ") -> " + r.type());
  return r;
}

Val HloBuilder::select_and_scatter_max(const Val& operand, const Val& source, const std::vector<int64_t>& window,
                                       const std::vector<int64_t>& strides) {
  const Val zero = constant(0, {}, operand.elem);
  // select(a, b) keeps a when a >= b: the first maximum in window order wins.
  const Val a{fresh(), {}, operand.elem}, b{fresh(), {}, operand.elem};
  const std::string c = fresh();
  const std::string select = "^bb0(" + a.name + ": " + a.type() + ", " + b.name + ": " + b.type() + "):\n      " +
                             c + " = \"stablehlo.compare\"(" + a.name + ", " + b.name +
                             ") {comparison_direction = #stablehlo<comparison_direction GE>} : (" + a.type() + ", " +
                             b.type() + ") -> tensor<i1>\n      \"stablehlo.return\"(" + c +
                             ") : (tensor<i1>) -> ()\n    ";
  Val r{fresh(), operand.shape, operand.elem};
  line(r.name + " = \"stablehlo.select_and_scatter\"(" + operand.name + ", " + source.name + ", " + zero.name +
       ") ({\n    " + select + "}, {\n    " + region("add", operand.elem) + "}) {window_dimensions = " +
       i64_array(window) + ", window_strides = " + i64_array(strides) + "} : (" + operand.type() + ", " +
       source.type() + ", " + zero.type() + ") -> " + r.type());
  return r;
}

Val HloBuilder::convolution(const Val& lhs, const Val& rhs, const Shape& out, const std::string& dim_numbers,
                            const std::vector<int64_t>& strides, const Pads& padding,
                            const std::vector<int64_t>& lhs_dilation, const std::vector<int64_t>& rhs_dilation,
                            int64_t feature_groups, int64_t batch_groups) {
  return emit("convolution", {lhs, rhs},
              "dimension_numbers = #stablehlo.conv<" + dim_numbers + ">, window_strides = " + i64_array(strides) +
                  ", padding = " + pads_attr(padding) + ", lhs_dilation = " + i64_array(lhs_dilation) +
                  ", rhs_dilation = " + i64_array(rhs_dilation) +
                  ", feature_group_count = " + std::to_string(feature_groups) +
                  " : i64, batch_group_count = " + std::to_string(batch_groups) + " : i64, " + kFullPrecision,
              out, lhs.elem);
}

Val HloBuilder::dot(const Val& lhs, const Val& rhs, int64_t lhs_c, int64_t rhs_c) {
  Shape out;
  for (std::size_t i = 0; i < lhs.shape.size(); ++i)
    if (static_cast<int64_t>(i) != lhs_c) out.push_back(lhs.shape[i]);
  for (std::size_t i = 0; i < rhs.shape.size(); ++i)
    if (static_cast<int64_t>(i) != rhs_c) out.push_back(rhs.shape[i]);
  return emit("dot_general", {lhs, rhs},
              "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [" + std::to_string(lhs_c) +
                  "], rhs_contracting_dimensions = [" + std::to_string(rhs_c) + "]>, " + kFullPrecision,
              out, lhs.elem);
}

}  // namespace convoy::pjrt
