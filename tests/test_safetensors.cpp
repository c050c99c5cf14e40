#include <fstream>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/safetensors.h"
#include "test_helpers.h"

namespace convoy::io {

TEST(Safetensors, RoundTripsModelWeightsByName) {
  testing::TempDir dir;
  nn::Sequential m = nn::seed_cnn();
  const auto params = m.initial_parameters(9);
  auto state = m.initial_state();
  state[3] = 0.25f;
  write_safetensors(dir.file("w.safetensors"), to_named(m, params, state));
  const NamedTensors back = read_safetensors(dir.file("w.safetensors"));
  EXPECT_EQ(back.at("dense_0.weight").shape(), (Shape{50, 320}));
  const FlatWeights w = from_named(m, back, "w.safetensors");
  EXPECT_EQ(w.params, params);
  EXPECT_EQ(w.state, state);
}

TEST(Safetensors, CorruptFilesAreUserErrors) {
  testing::TempDir dir;
  nn::Sequential m = nn::seed_cnn();
  write_safetensors(dir.file("w.safetensors"), to_named(m, m.initial_parameters(1), m.initial_state()));
  std::ifstream in(dir.file("w.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir.file("cut.safetensors"), std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  std::ofstream(dir.file("junk.safetensors"), std::ios::binary) << std::string("\x10\0\0\0\0\0\0\0{not json!!!!!!}", 24);
  EXPECT_THROW(read_safetensors(dir.file("cut.safetensors")), UserError);
  EXPECT_THROW(read_safetensors(dir.file("junk.safetensors")), UserError);
  EXPECT_THROW(read_safetensors(dir.file("missing.safetensors")), UserError);
  NamedTensors partial = read_safetensors(dir.file("w.safetensors"));
  partial.erase("conv2d_1.bias");
  EXPECT_THROW(from_named(m, partial, "partial"), UserError);
}

}  // namespace convoy::io
