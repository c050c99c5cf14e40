#include "convoy/dist/data_parallel.h"

#include <cstring>
#include <vector>

#include "backends/device_reducer.h"
#include "convoy/backends/executable_internals.h"

namespace convoy::dist {

void attach(Strategy& s, Executable& exe, bool sync_batch_norm) {
  if (s.world_size() == 1) return;
  // A GPU strategy's reducer works on device memory: a CPU executable's host
  // buffers would reach it as if they were the GPU's.
  GradientReducer* reducer = s.gradient_reducer();
  const std::string& device = exe.compiled_for().device;
  require(dynamic_cast<DeviceGradientReducer*>(reducer) == nullptr || device.rfind("cuda", 0) == 0,
          "--strategy " + s.name() + " trains one replica per GPU, but this replica is on " + device +
              "; use --device cuda, or --strategy mpi for replicas on CPUs");
  ExecutableInternals& in = exe.internals();
  for (const Held held : {Held::parameters, Held::state, Held::optimizer_state}) {  // rank 0's everywhere
    std::vector<float> values = in.copy_of(held);
    s.broadcast(values);
    in.write(held, values);
  }
  in.set_gradient_reducer(reducer);
  if (sync_batch_norm) in.set_batch_norm_reducer([&s](std::span<double> sums) { s.allreduce_sum(sums); });
}

int64_t shard_size(int64_t examples, const Strategy& s) { return examples / s.world_size(); }

data::Dataset shard(const data::Dataset& order, int64_t examples, const Strategy& s) {
  const int64_t world = s.world_size();
  if (world == 1) return order;
  return order.take(shard_size(examples, s) * world).shard(world, s.rank());
}

EvalShard::EvalShard(const data::LabeledImages& all, const Strategy& s) {
  if (s.world_size() == 1) {
    view_ = &all;
    return;
  }
  const int64_t n = all.size(), world = s.world_size(), rank = s.rank();
  const int64_t begin = n * rank / world, end = n * (rank + 1) / world;
  Shape shape = all.images.shape();
  const int64_t example_floats = numel(all.example_shape());
  shape[0] = end - begin;
  own_ = {Tensor(DType::f32, shape), Tensor(DType::i32, {end - begin})};
  std::memcpy(own_.images.raw(), all.images.data<float>().data() + begin * example_floats, own_.images.nbytes());
  std::memcpy(own_.labels.raw(), all.labels.data<int32_t>().data() + begin, own_.labels.nbytes());
}

Metrics sum(Strategy& s, const Metrics& m) {
  if (s.world_size() == 1) return m;
  // One message; counts are exact in a double up to 2^53.
  double v[3] = {m.loss_sum, static_cast<double>(m.correct), static_cast<double>(m.count)};
  s.allreduce_sum(std::span<double>(v, 3));
  return {.loss_sum = v[0], .correct = static_cast<int64_t>(v[1]), .count = static_cast<int64_t>(v[2])};
}

bool any(Strategy& s, bool flag) {
  if (s.world_size() == 1) return flag;
  int64_t votes = flag ? 1 : 0;
  s.allreduce_sum(std::span<int64_t>(&votes, 1));
  return votes > 0;
}

void average_state(Strategy& s, Executable& exe) {
  if (s.world_size() == 1 || exe.internals().size(Held::state) == 0) return;
  std::vector<float> state = exe.internals().copy_of(Held::state);
  s.allreduce_mean(state);
  exe.internals().write(Held::state, state);
}

}  // namespace convoy::dist
