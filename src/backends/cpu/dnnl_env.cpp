#include "backends/cpu/dnnl_env.h"

#include <stdexcept>
#include <string>

namespace convoy::cpu {

dnnl::memory::desc plain_desc(const Shape& shape) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::dims dims(shape.begin(), shape.end());
  switch (shape.size()) {
    case 1: return {dims, dnnl::memory::data_type::f32, tag::x};
    case 2: return {dims, dnnl::memory::data_type::f32, tag::nc};
    case 3: return {dims, dnnl::memory::data_type::f32, tag::ncw};
    case 4: return {dims, dnnl::memory::data_type::f32, tag::nchw};
  }
  throw std::logic_error("plain_desc: unsupported rank " + std::to_string(shape.size()));
}

dnnl::memory::desc activation_desc(const Shape& shape) {
  if (shape.size() != 4) return plain_desc(shape);
  return {dnnl::memory::dims(shape.begin(), shape.end()), dnnl::memory::data_type::f32,
          dnnl::memory::format_tag::nhwc};
}

dnnl::memory::desc retyped(const dnnl::memory::desc& md, dnnl::memory::data_type type) {
  if (md.data_type() == type) return md;
  if (md.data.format_kind == dnnl_format_kind_any) return {md.dims(), type, dnnl::memory::format_tag::any};
  const dnnl_blocking_desc_t& blocking = md.data.format_desc.blocking;
  if (md.data.format_kind != dnnl_blocked || blocking.inner_nblks != 0)
    throw std::logic_error("retyped: only plain layouts change type here");
  return {md.dims(), type, dnnl::memory::dims(blocking.strides, blocking.strides + md.data.ndims)};
}

std::size_t floats_for(const dnnl::memory::desc& md) {
  return (md.get_size() + sizeof(float) - 1) / sizeof(float);
}

Prim Prim::reorder(const DnnlEnv& env, const dnnl::memory::desc& from, const void* src,
                   const dnnl::memory::desc& to, void* dst) {
  // Plain reorders need no scratchpad, so the default attributes suffice.
  Prim p(dnnl::reorder::primitive_desc(env.engine, from, env.engine, to));
  p.bind(env, DNNL_ARG_FROM, from, src);
  p.bind(env, DNNL_ARG_TO, to, dst);
  return p;
}

void Prim::bind(const DnnlEnv& env, int arg, const dnnl::memory::desc& md, const void* ptr) {
  keep_.emplace_back(md, env.engine, const_cast<void*>(ptr));
  args_.push_back({arg, keep_.back().get()});
}

void Prim::bind_scratchpad(const DnnlEnv& env, void* ptr) {
  if (scratch_desc_.get_size() > 0) bind(env, DNNL_ARG_SCRATCHPAD, scratch_desc_, ptr);
}

void Prim::run(DnnlEnv& env) const {
  dnnl_status_t status = dnnl_primitive_execute(prim_.get(), env.stream.get(), static_cast<int>(args_.size()),
                                                args_.data());
  if (status != dnnl_success) throw std::runtime_error("oneDNN primitive failed with status " + std::to_string(status));
}

}  // namespace convoy::cpu
