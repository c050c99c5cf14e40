#include <zlib.h>

#include <fstream>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"
#include "test_helpers.h"

namespace convoy::data {
namespace {

using testing::error_of;

std::string idx_header(const std::vector<uint32_t>& dims) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
  return s;
}

std::string idx_bytes(const std::vector<uint32_t>& dims, uint8_t fill_start) {
  std::string s = idx_header(dims);
  size_t n = 1;
  for (uint32_t d : dims) n *= d;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(fill_start + i));
  return s;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

}  // namespace

TEST(Idx, ReadsRawAndGzipIdentically) {
  testing::TempDir dir;
  const std::string bytes = idx_bytes({3, 2, 4}, 10);
  write_raw(dir.file("a.idx"), bytes);
  write_gz(dir.file("a.idx.gz"), bytes);
  for (const auto& name : {"a.idx", "a.idx.gz"}) {
    Tensor t = read_idx_u8(dir.file(name));
    EXPECT_EQ(t.shape(), (Shape{3, 2, 4}));
    EXPECT_EQ(t.data<uint8_t>()[0], 10);
    EXPECT_EQ(t.data<uint8_t>()[23], 33);
  }
}

TEST(Idx, MissingTruncatedAndForeignFilesAreUserErrorsNamingTheFile) {
  testing::TempDir dir;
  EXPECT_NE(error_of([&] { read_idx_u8(dir.file("nope.idx")); }).find("nope.idx"), std::string::npos);

  const std::string bytes = idx_bytes({100, 28, 28}, 0);
  write_gz(dir.file("short.gz"), bytes.substr(0, bytes.size() / 2));
  const std::string truncated = error_of([&] { read_idx_u8(dir.file("short.gz")); });
  EXPECT_NE(truncated.find("short.gz"), std::string::npos);
  EXPECT_NE(truncated.find("truncated"), std::string::npos);

  write_raw(dir.file("text.idx"), "hello, world");
  EXPECT_NE(error_of([&] { read_idx_u8(dir.file("text.idx")); }).find("not an IDX file"), std::string::npos);

  // A gzip header followed by garbage: corrupt compressed stream.
  write_raw(dir.file("bad.gz"), std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage-garbage", 26));
  EXPECT_NE(error_of([&] { read_idx_u8(dir.file("bad.gz")); }).find("bad.gz"), std::string::npos);

  // A header claiming an absurd size must not allocate it, raw or compressed.
  write_raw(dir.file("huge.idx"), idx_header({0xffffff, 0xffffff}) + "abc");
  write_gz(dir.file("huge.idx.gz"), idx_header({0xffffff, 0xffffff}) + "abc");
  for (const auto& name : {"huge.idx", "huge.idx.gz"})
    EXPECT_NE(error_of([&] { read_idx_u8(dir.file(name)); }).find("more data"), std::string::npos) << name;
}

TEST(FashionMnist, LoadsTheInstalledDatasetNormalised) {
  TrainTest d = load_fashion_mnist(kFashionMnistDir);
  ASSERT_EQ(d.train.size(), 60000);
  ASSERT_EQ(d.test.size(), 10000);
  EXPECT_EQ(d.train.images.shape(), (Shape{60000, 1, 28, 28}));
  double sum = 0;
  for (float v : d.train.images.data<float>()) sum += v;
  // Fashion-MNIST's mean pixel is 0.286; normalised with the seed's MNIST constants.
  EXPECT_NEAR(sum / d.train.images.numel(), (0.2860 - kSeedMean) / kSeedStd, 0.01);
  std::vector<int> counts(10);
  for (int32_t y : d.test.labels.data<int32_t>()) counts.at(y)++;
  for (int c : counts) EXPECT_EQ(c, 1000);
}

TEST(FashionMnist, MissingDirectoryAndMissingFileAreNamed) {
  EXPECT_NE(error_of([] { load_fashion_mnist("/nonexistent"); }).find("/nonexistent"), std::string::npos);
  testing::TempDir dir;
  EXPECT_NE(error_of([&] { load_fashion_mnist(dir.path()); }).find("train-images-idx3-ubyte"), std::string::npos);
}

TEST(EpochBatches, ShufflesPerEpochDeterministicallyAndDropsTheRemainder) {
  LabeledImages d{Tensor(DType::f32, {10, 1, 1, 1}), Tensor(DType::i32, {10})};
  for (int i = 0; i < 10; ++i) {
    d.images.data<float>()[i] = static_cast<float>(i);
    d.labels.data<int32_t>()[i] = i;
  }
  auto order = [&](uint64_t seed, int64_t epoch) {
    EpochBatches b(d, 3, true, true, seed, epoch);
    EXPECT_EQ(b.size(), 3);
    std::vector<int32_t> all;
    float x[3];
    int32_t y[3];
    for (int64_t i = 0; i < b.size(); ++i) {
      EXPECT_EQ(b.gather(i, x, y), 3);
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(x[k], static_cast<float>(y[k]));
        all.push_back(y[k]);
      }
    }
    return all;
  };
  EXPECT_EQ(order(1, 1), order(1, 1));
  EXPECT_NE(order(1, 1), order(1, 2));
  EXPECT_NE(order(1, 1), order(2, 1));
  EpochBatches keep(d, 3, false, false, 0, 0);
  EXPECT_EQ(keep.size(), 4);
  float x[3];
  int32_t y[3];
  EXPECT_EQ(keep.gather(3, x, y), 1);
  EXPECT_EQ(y[0], 9);
}

}  // namespace convoy::data
