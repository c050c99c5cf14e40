// Each layer of a zoo model timed on its own: the CPU op's forward and
// backward pass on random data, best of --reps runs. With one thread
// (OMP_NUM_THREADS=1) it reads the thread's CPU time, which other processes
// on a busy machine barely disturb; with more it reads the wall clock.
// Unlike `convoy train --profile`, every op's time is its best, not a mean,
// and a first layer's backward pass computes its input gradient too only
// when --input-gradient 1.
//
//   cpu_op_times [--model seed_cnn] [--channels 3 --size 64] [--batch 128] [--reps 200] [--input-gradient 0]
//                [--conv-algo auto] [--kernels auto|base|avx2|avx512]
//                [--fuse 1]
// (--channels and --size shape a zoo model's input; the seed CNN's is fixed;
// --conv-algo direct times oneDNN's convolutions where auto runs our own;
// the ops are the CPU device's, so a fused first block (conv -> pool -> ReLU,
// backends/cpu/conv_pool_op.h) is timed as its conv's line, a ReLU fused into
// a batch norm as the BN's, and the fused layers say "runs in" (a ReLU fused
// into an add says it too, but joins are left out: its time is nowhere);
// --fuse 0 times every layer on its own op)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/backend_entry.h"
#include "op_timing.h"
#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/nn/zoo.h"

namespace {

std::vector<float> uniform(int64_t count, convoy::Rng& rng) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace convoy;
  std::string model = "seed_cnn";
  int64_t channels = 3, size = 64, batch = 128, reps = 200;
  bool input_gradient = false, fuse = true;
  ConvAlgo algo = ConvAlgo::automatic;
  KernelSet kernels = KernelSet::automatic;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--channels") channels = std::stoll(value);
    else if (flag == "--size") size = std::stoll(value);
    else if (flag == "--batch") batch = std::stoll(value);
    else if (flag == "--reps") reps = std::stoll(value);
    else if (flag == "--kernels") kernels = parse_kernel_set(value);
    else if (flag == "--input-gradient") input_gradient = value == "1";
    else if (flag == "--conv-algo") algo = parse_conv_algo(value);
    else if (flag == "--fuse") fuse = value == "1";
    else
      throw UserError("unknown flag " + flag +
                      "; flags: --model --channels --size --batch --reps --input-gradient --conv-algo --kernels --fuse");
  }
  const nn::Model m = nn::model_by_name(model, {.input = {channels, size, size}, .classes = 10});
  const bool cpu_clock = omp_get_max_threads() == 1;
  const clockid_t clock = cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
  std::printf("%s, batch %lld, %d thread(s), best of %lld, %s, conv %s\n%-16s %10s %10s\n", model.c_str(),
              static_cast<long long>(batch), omp_get_max_threads(), static_cast<long long>(reps),
              cpu_clock ? "thread CPU time" : "wall clock", conv_algo_name(algo), "layer", "fwd ms", "bwd ms");
  Rng rng(7);
  const std::vector<float> params = m.initial_parameters(1), state = m.initial_state();
  cpu::DnnlEnv env;
  const std::vector<uint64_t> seeds(m.layers().size(), 1);
  cpu::CpuOps made = cpu::backend(kernels).make_cpu_ops(env, m, batch, seeds, algo, input_gradient, fuse);
  struct Buffers {
    std::vector<float> x, y, dy, dx, p, g, s, scratch;
  };
  // Fresh random buffers for layer i's op, bound.
  auto bind = [&](std::size_t i) {
    const nn::LayerPlan& plan = m.layers()[i];
    cpu::CpuOp& op = *made.ops[i];
    const int64_t in = batch * numel(plan.input_shape), out = batch * numel(plan.output_shape);
    auto d = std::make_unique<Buffers>();
    d->x = uniform(in, rng);
    d->y.resize(static_cast<std::size_t>(out));
    d->dy = uniform(out, rng);
    d->dx.resize(static_cast<std::size_t>(in));
    d->p = params;
    d->g.resize(params.size() + 1);
    d->s = state;
    d->scratch.resize(op.scratchpad_bytes() / sizeof(float) + 16);
    cpu::OpBuffers b;
    b.src = d->x.data();
    b.dst = d->y.data();
    b.diff_dst = d->dy.data();
    b.diff_src = i == 0 && !input_gradient ? nullptr : d->dx.data();
    if (!plan.params.empty()) {
      b.params = d->p.data() + plan.params[0].offset;
      b.grads = d->g.data() + plan.params[0].offset;
    }
    if (!plan.state.empty()) b.state = d->s.data() + plan.state[0].offset;
    b.scratchpad = d->scratch.data();
    b.srcs = {b.src};
    b.diff_srcs = {b.diff_src};
    op.bind(env, b);
    return d;
  };
  // One layer's buffers at a time (a large model's would not fit together),
  // except a fused chain's: its head reads its members', bound before it.
  std::vector<std::unique_ptr<Buffers>> held(m.layers().size());
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    if (m.layers()[i].inputs.size() != 1) continue;  // joins read several buffers: left out
    for (std::size_t j = i + 1; j < m.layers().size(); ++j)
      if (made.runs_in[j] == static_cast<int>(i)) held[j] = bind(j);
    const std::unique_ptr<Buffers> mine = held[i] ? std::move(held[i]) : bind(i);
    const bench::BestPasses best = bench::best_passes(*made.ops[i], env, clock, reps, 3);
    const int in = made.runs_in[i];
    std::printf("%-16s %10.3f %10.3f%s%s\n", m.layers()[i].name.c_str(), 1e3 * best.forward, 1e3 * best.backward,
                in < 0 ? "" : "   runs in ", in < 0 ? "" : m.layers()[static_cast<std::size_t>(in)].name.c_str());
  }
  return 0;
} catch (const convoy::UserError& e) {
  std::fprintf(stderr, "cpu_op_times: %s\n", e.what());
  return 2;
}
