// Files that the fuzz targets (fuzz/) or reading a parser for them showed to
// crash, allocate what the file cannot hold or be accepted when corrupt
// (docs/reliability.md, "Fuzzing"): each must now be one UserError.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include "convoy/app/run_checkpoint.h"
#include "convoy/config/run_config.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/image/codec.h"
#include "convoy/image/decode_budget.h"
#include "convoy/io/safetensors.h"
#include "convoy/train/history_json.h"
#include "data/example_file.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy {
namespace {

using convoy::testing::error_of;
using convoy::testing::TempDir;
using records::testing::write_bytes;

// The cache file's format (data/example_file.h), little-endian.
std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string i64(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string named(const std::string& s) { return u32(static_cast<uint32_t>(s.size())) + s; }
const std::string kCacheMagic = "convoy-examples-1\n";

// Reads every example of the cache file at `path`; the UserError's message, or "(no exception)".
std::string read_cache_at(const std::string& path) {
  return error_of([&] {
    data::ExampleReader reader(path);
    while (reader.next()) {
    }
  });
}

// The same for a cache file holding `bytes`.
std::string read_cache(const std::string& bytes) {
  TempDir dir;
  write_bytes(dir.file("train.cache"), bytes);
  return read_cache_at(dir.file("train.cache"));
}

TEST(FuzzFindings, ACacheFileReadsBackWhatWasWritten) {
  const std::string one = u32(1) + u32(1) + named("x") + '\x02' + '\x01' + i64(3) + "abc" + named("id") + u32(1) +
                          named("n0");
  EXPECT_EQ(read_cache(kCacheMagic + one + one + u32(0xFFFFFFFF)), "(no exception)");
  EXPECT_EQ(read_cache(kCacheMagic + u32(1) + u32(0) + named("empty") + '\x00' + '\x03' + i64(0) + i64(28) + i64(28) +
                       u32(0xFFFFFFFF)),
            "(no exception)");  // a tensor without elements holds no data
}

// Before: the shape [2^40, 2^40, 2^40, 2^40] passed a per-dimension check and
// its element count wrapped to 0, so a tensor claiming 2^160 values was
// returned; a text feature of 2^32 - 1 strings allocated 128 GB (bad_alloc);
// a string's declared 4 GB were allocated before the file was found short.
TEST(FuzzFindings, ACacheFileDeclaringMoreThanItHoldsIsOneUserError) {
  const std::string truncated = "the cache file is truncated or corrupt; delete it so the next run rebuilds it";
  const std::string huge_shape = u32(1) + u32(0) + named("x") + '\x02' + '\x04' + i64(int64_t{1} << 40) +
                                 i64(int64_t{1} << 40) + i64(int64_t{1} << 40) + i64(int64_t{1} << 40);
  const std::string many_strings = u32(0) + u32(1) + named("id") + u32(0xFFFFFFFF);
  const std::string long_string = u32(0) + u32(1) + named("id") + u32(1) + u32(0xFFFFFFF0);
  // 2^38 elements: under the 2^40 cap, so only the file's size refuses it, and
  // only a check before the allocation (1 TiB) gives the one line.
  const std::string past_end = u32(1) + u32(0) + named("x") + '\x00' + '\x01' + i64(int64_t{1} << 38) + "abcd";
  const std::string empty_huge = u32(1) + u32(0) + named("x") + '\x02' + '\x03' + i64(0) + i64(int64_t{1} << 40) +
                                 i64(int64_t{1} << 40);
  for (const std::string& example : {huge_shape, many_strings, long_string, past_end, empty_huge}) {
    const std::string msg = read_cache(kCacheMagic + example + u32(0xFFFFFFFF));
    EXPECT_NE(msg.find(truncated), std::string::npos) << msg;
  }
  EXPECT_NE(read_cache("convoy-exam").find("not a convoy cache file"), std::string::npos);
}

// In a death test's child: reads the cache file at `path` with 1 GiB of
// address space to spare, prints the error and exits 0 if it is the file's.
void read_with_1gib_to_spare(const std::string& path) {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  const rlim_t cap = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
  const rlimit limit{cap, cap};
  ::setrlimit(RLIMIT_AS, &limit);
  const std::string msg = read_cache_at(path);
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::_Exit(msg.find("the cache file is truncated or corrupt") != std::string::npos ? 0 : 1);
}

// Before: a text feature's count was checked against the file's size (4
// bytes a string) and then `count` strings were made at once, 32 bytes each:
// ~8x the file. Here a sparse 512 MiB file claims 2^27 strings, 4 GiB of
// them, in a child whose address space has 1 GiB to spare: only a reader
// whose memory follows the strings it has read reaches the corrupt one.
TEST(FuzzFindings, ACacheFilesTextCountCostsOnlyTheStringsRead) {
  TempDir dir;
  const std::string path = dir.file("train.cache");
  write_bytes(path, kCacheMagic + u32(0) + u32(1) + named("id") + u32(uint32_t{1} << 27) + named("a") +
                        u32(0xFFFFFFF0));
  std::filesystem::resize_file(path, (uint64_t{1} << 29) + 64);  // zeros, no disk
  EXPECT_EXIT(read_with_1gib_to_spare(path), ::testing::ExitedWithCode(0), "truncated or corrupt");
}

// Before: a folder was told "delete it", and a FIFO without a writer blocked
// fopen forever. Now each is named as what it is, without waiting.
TEST(FuzzFindings, ACacheThatIsNoRegularFileIsNamedAsWhatItIs) {
  TempDir dir;
  const std::string folder = error_of([&] { data::ExampleReader reader(dir.path()); });
  EXPECT_NE(folder.find(": is a folder, not a convoy cache file; pass a file's path inside it"), std::string::npos)
      << folder;
  EXPECT_EQ(folder.find("delete"), std::string::npos) << folder;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  const std::string fifo = error_of([&] { data::ExampleReader reader(dir.file("fifo")); });
  EXPECT_NE(fifo.find(": is a pipe (FIFO), not a convoy cache file; pass the path of a regular file"),
            std::string::npos)
      << fifo;
  const std::string device = error_of([&] { data::ExampleReader reader("/dev/null"); });
  EXPECT_NE(device.find("/dev/null: is a device or socket, not a convoy cache file"), std::string::npos) << device;
}

// The one check of a declared shape against the bytes available, used by the
// cache file, safetensors and IDX readers.
TEST(FuzzFindings, AShapesBytesAreCheckedAgainstWhatIsAvailableWithoutOverflow) {
  EXPECT_EQ(shape_bytes_within(Shape{2, 3}, 4, 24), 24u);
  EXPECT_EQ(shape_bytes_within(Shape{2, 3}, 4, 23), std::nullopt);
  EXPECT_EQ(shape_bytes_within(Shape{}, 4, 4), 4u);
  EXPECT_EQ(shape_bytes_within(Shape{0, 5}, 4, 20), 20u) << "a zero size counts as 1";
  EXPECT_EQ(shape_bytes_within(Shape{0, 6}, 4, 20), std::nullopt);
  EXPECT_EQ(shape_bytes_within(Shape{-1}, 1, 100), std::nullopt);
  const int64_t big = int64_t{1} << 40;  // the product 2^160 would wrap to 0
  EXPECT_EQ(shape_bytes_within(Shape{big, big, big, big}, 1, UINT64_MAX), std::nullopt);
}

// A safetensors file of `header` JSON (padded to 8 bytes) and `data`.
std::string safetensors_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file;
  for (int i = 0; i < 8; ++i) file += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return file + header + data;
}

std::string safetensors_error(const std::string& file) {
  return error_of([&] { io::parse_safetensors(file, "w.safetensors"); });
}

// Before: data_offsets were only checked to lie within the file, so tensors
// could overlap: 20,000 tensors each claiming the same 2 MB made a 2 MB file
// cost 40 GB. Now the offsets, sorted, must tile the data section.
TEST(FuzzFindings, SafetensorsWhoseTensorsOverlapOrLeaveGapsAreRefused) {
  const std::string data(16, '\0');
  EXPECT_EQ(safetensors_error(safetensors_file(
                R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                data)),
            "(no exception)");
  const std::string overlap = safetensors_error(safetensors_file(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
      data));
  EXPECT_NE(overlap.find("w.safetensors: tensor '"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("overlap another tensor's; the file is corrupt"), std::string::npos) << overlap;
  const std::string gap = safetensors_error(safetensors_file(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      data));
  EXPECT_NE(gap.find("w.safetensors: tensor 'b': data_offsets [8, 16] leave a gap"), std::string::npos) << gap;
  const std::string short_end = safetensors_error(
      safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
  EXPECT_NE(short_end.find("end at byte 8 of a data section of 16 bytes"), std::string::npos) << short_end;
  // A skipped tensor's bytes count too: skipping 'b' does not hide the overlap.
  const std::string skipped = error_of([&] {
    io::parse_safetensors(safetensors_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                           R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                           data),
                          "w.safetensors", nullptr, [](const std::string& name) { return name == "b"; });
  });
  EXPECT_NE(skipped.find("overlap"), std::string::npos) << skipped;
  // convoy's own writer tiles: a round trip with an empty tensor among others.
  io::NamedTensors tensors;
  tensors.emplace("w", Tensor(DType::f32, Shape{3, 2}));
  tensors.emplace("e", Tensor(DType::f32, Shape{0, 5}));
  tensors.emplace("b", Tensor(DType::u8, Shape{3}));
  EXPECT_EQ(safetensors_error(io::safetensors_bytes(tensors, {{"k", "v"}})), "(no exception)");
}

// A PNG of `width` x `height` gray pixels of `depth` bits whose IDAT holds
// `rows` zero rows, compressed at zlib `level`.
std::string gray_png_header(uint32_t width, uint32_t height, uint32_t rows, uint8_t depth = 8,
                            int level = Z_DEFAULT_COMPRESSION) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    const std::string body = type + data;
    return be32(static_cast<uint32_t>(data.size())) + body +
           be32(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
  };
  const std::string raw(static_cast<std::size_t>(rows) * ((uint64_t{width} * depth + 7) / 8 + 1), '\0');
  std::string packed(compressBound(static_cast<uLong>(raw.size())), '\0');
  uLongf packed_size = packed.size();
  compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size, reinterpret_cast<const Bytef*>(raw.data()),
            static_cast<uLong>(raw.size()), level);
  packed.resize(packed_size);
  const std::string ihdr = be32(width) + be32(height) + std::string{static_cast<char>(depth), 0, 0, 0, 0};  // gray, not interlaced
  return "\x89PNG\r\n\x1a\n" + chunk("IHDR", ihdr) + chunk("IDAT", packed) + chunk("IEND", "");
}

std::string decode_error(const std::string& file, const std::string& name) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  return error_of([&] { image::decode_image(bytes, name); });
}

TEST(FuzzFindings, APngHeaderClaimingMorePixelsThanItsBytesHoldIsRefusedBeforeAllocating) {
  ASSERT_EQ(decode_error(gray_png_header(300, 200, 200), "fits.png"), "(no exception)");
  // Before: 16000 x 16000 (under the 2^28-pixel limit) reserved and allocated
  // 256 MB for a file of 100 bytes, then found it truncated.
  image::reset_decode_budget_peak();
  const std::string msg = decode_error(gray_png_header(16000, 16000, 1), "bomb.png");
  EXPECT_NE(msg.find("bomb.png: truncated or corrupt PNG (its header claims 16000x16000 pixels, more than its"),
            std::string::npos)
      << msg;
  EXPECT_EQ(image::decode_budget_stats().peak, 0u) << "nothing reserved";
  // Past the limit: refused by its size alone.
  const std::string huge = decode_error(gray_png_header(100000, 100000, 1), "huge.png");
  EXPECT_NE(huge.find("huge.png: the PNG header claims 100000x100000 pixels, more than convoy decodes"),
            std::string::npos)
      << huge;
}

// An all-zero 4096x4096 1-bit gray PNG at zlib level 9 inflates ~993 times
// its file size: it must decode, so the deflate bound cannot be set lower.
TEST(FuzzFindings, APngNearTheDeflateBoundDecodes) {
  const std::string file = gray_png_header(4096, 4096, 4096, 1, 9);
  ASSERT_GT(4096.0 * 513 / file.size(), 990.0) << file.size();
  EXPECT_EQ(decode_error(file, "zeros.png"), "(no exception)");
}

// ExampleWriter -> ExampleReader keeps an empty tensor, a full one and text
// features (an empty list and an empty string among them).
TEST(FuzzFindings, ACacheFileRoundTripsEmptyTensorsAndTexts) {
  TempDir dir;
  data::Example e;
  Tensor full(DType::i32, Shape{2, 3});
  for (int i = 0; i < 6; ++i) full.data<int32_t>()[i] = i * 7 - 3;
  e.set("empty", Tensor(DType::f32, Shape{0, 5})).set("full", full);
  e.set_texts("ids", {"a", "", "ccc"}).set_texts("none", {});
  {
    data::ExampleWriter writer(dir.file("c.cache"));
    writer.write(e);
    writer.write(e);
    writer.commit();
  }
  data::ExampleReader reader(dir.file("c.cache"));
  for (int k = 0; k < 2; ++k) {
    const auto back = reader.next();
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->tensor("empty").shape(), (Shape{0, 5}));
    EXPECT_EQ(back->tensor("full").shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back->tensor("full").data<int32_t>()[i], i * 7 - 3);
    EXPECT_EQ(back->texts("ids"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_TRUE(back->texts("none").empty());
  }
  EXPECT_FALSE(reader.next().has_value());
}

// A version-1 checkpoint (no checksum, so nothing stops a hostile one before
// the parser) of the model `config_yaml` describes, holding none of its tensors.
std::string checkpoint_without_tensors(const std::string& config_yaml) {
  const train::RunConfig config = train::parse_run_config(config_yaml, "model.yaml", /*yaml=*/true);
  return io::safetensors_bytes({}, {{"format", "convoy-checkpoint-1"},
                                    {"epoch", "0"},
                                    {"config", train::run_config_json(config)},
                                    {"history", train::history_json({})}});
}

// A version-1 checkpoint (no checksum) whose recorded config asks for a
// model of 784 x 10^9 weights and which holds none of them. Before: its
// buffers (3 TB) were allocated before any tensor was looked up (bad_alloc,
// an internal error); now the model itself is refused by its size.
TEST(FuzzFindings, ACheckpointWhoseConfigAsksForAHugeModelIsRefusedBeforeAllocating) {
  const std::string file = checkpoint_without_tensors("model: {layers: [flatten, {type: dense, units: 1000000000}]}\n");
  const std::string msg = error_of([&] { train::parse_checkpoint(file, "huge.safetensors"); });
  // Refused where the model is built (nn::Model bounds every tensor at 2^31
  // values), before any buffer of that size exists.
  EXPECT_NE(msg.find("dense_0's weight [1000000000, 784] would hold"), std::string::npos) << msg;
}

// Within the bound, a checkpoint missing its model's tensors is named as such,
// with what to do, before the model's buffers are allocated.
TEST(FuzzFindings, ACheckpointMissingItsModelsTensorsSaysWhatToDo) {
  const std::string file = checkpoint_without_tensors("model: {layers: [flatten, {type: dense, units: 10}]}\n");
  EXPECT_EQ(error_of([&] { train::parse_checkpoint(file, "small.safetensors"); }),
            "small.safetensors: no tensor 'dense_0.weight' for this model; the file is corrupt or holds another "
            "model's weights");
}

}  // namespace
}  // namespace convoy
