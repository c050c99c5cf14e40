#pragma once
// oneDNN plumbing shared by the CPU ops; private to the backend so no oneDNN
// type reaches a public header. Primitives are described once, created once,
// and executed many times with a prebuilt argument array (the C API, so a step
// builds no argument map).
#include <cstdint>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "convoy/core/tensor.h"

namespace convoy::cpu {

struct DnnlEnv {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // Every primitive uses caller-provided scratchpad so none allocates in a step.
  dnnl::primitive_attr attr() const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }
  // What convolutions and dense layers multiply in (CompileOptions::precision):
  // f32, or bf16 with f32 sums and outputs (weighted_op.h).
  dnnl::memory::data_type compute = dnnl::memory::data_type::f32;
  // bf16 where oneDNN multiplies it in AMX tiles: there its bf16
  // convolutions outrun convoy's own fp32 kernels on most passes, and
  // convolutions run each pass in bf16 or fp32 by amx_passes.h. A rule by
  // the CPU, not by timing, so reruns repeat.
  bool bf16_on_amx() const {
    return compute == dnnl::memory::data_type::bf16 && onednn_isa_reaches(dnnl::cpu_isa::avx512_core_amx);
  }
  // Whether oneDNN will use `isa`'s instructions here: the CPU's, as
  // DNNL_MAX_CPU_ISA may lower them. oneDNN's ISA values are nested bit
  // sets: each later one holds every bit of those it extends.
  static bool onednn_isa_reaches(dnnl::cpu_isa isa) {
    const auto want = static_cast<unsigned>(isa);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
  }
};

// Canonical layout for a full shape (batch first): x, nc, ncw or nchw. The
// layout of parameters and of data crossing the Executable's edges.
dnnl::memory::desc plain_desc(const Shape& shape);
// Layout of activations inside the backend: NHWC for images (the layout
// oneDNN's fast convolutions and our pooling kernels prefer), nc for vectors.
dnnl::memory::desc activation_desc(const Shape& shape);
// `md` (a plain layout, or format any) with elements of type `type`.
dnnl::memory::desc retyped(const dnnl::memory::desc& md, dnnl::memory::data_type type);
// Floats of a buffer that holds `md`'s bytes (bf16 tensors may have an odd count).
std::size_t floats_for(const dnnl::memory::desc& md);

class Prim {
 public:
  Prim() = default;
  template <class PrimitiveDesc>
  explicit Prim(const PrimitiveDesc& pd)
      : prim_(pd.get()), scratch_desc_(pd.scratchpad_desc()), implementation_(pd.impl_info_str()) {}

  std::size_t scratchpad_bytes() const { return scratch_desc_.get_size(); }
  // Binds `arg` to `md` over memory the caller owns.
  void bind(const DnnlEnv& env, int arg, const dnnl::memory::desc& md, const void* ptr);
  void bind_scratchpad(const DnnlEnv& env, void* ptr);
  void run(DnnlEnv& env) const;
  // A reorder between two layouts of the same tensor.
  static Prim reorder(const DnnlEnv& env, const dnnl::memory::desc& from, const void* src,
                      const dnnl::memory::desc& to, void* dst);
  explicit operator bool() const { return static_cast<bool>(prim_); }
  // oneDNN's name for the kernels it picked, e.g. "brgconv:avx512_core_amx_bf16".
  const std::string& implementation() const { return implementation_; }

 private:
  dnnl::primitive prim_;
  dnnl::memory::desc scratch_desc_;
  std::vector<dnnl::memory> keep_;
  std::vector<dnnl_exec_arg_t> args_;
  std::string implementation_;
};

}  // namespace convoy::cpu
