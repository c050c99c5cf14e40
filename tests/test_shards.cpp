// write_shards: a class-folder tree or CSV manifest → TFRecord shards that
// hold every image once, byte for byte, in shards near the target size.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "convoy/core/temporary_files.h"
#include "convoy/records/shards.h"
#include "convoy/records/tfrecord_dataset.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::records {
namespace {

namespace fs = std::filesystem;
using convoy::testing::error_of;
using convoy::testing::TempDir;
using testing::pattern;
using testing::read_bytes;
using testing::write_bytes;

// root/<class>/<i>.jpg with 1-6 KB of distinct bytes each; returns id → bytes.
std::map<std::string, std::string> class_tree(const std::string& root, int per_class) {
  std::map<std::string, std::string> files;
  int k = 0;
  for (const char* c : {"cat", "dog", "eel"}) {
    fs::create_directories(fs::path(root) / c);
    for (int i = 0; i < per_class; ++i, ++k) {
      const std::string id = std::string(c) + "/" + std::to_string(i) + ".jpg";
      files[id] = pattern(1000 + (k * 733) % 5000, k);
      write_bytes(root + "/" + id, files[id]);
    }
  }
  return files;
}

std::vector<std::string> shard_files(const ShardsWritten& w) {
  std::vector<std::string> out;
  for (const auto& s : w.shards) out.push_back(s.file);
  return out;
}

}  // namespace

TEST(Shards, EveryImageOnceByteForByteInShardsNearTheTarget) {
  TempDir dir;
  const auto files = class_tree(dir.file("tree"), 20);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  uint64_t total = 0, largest = 0;
  for (const auto& [id, bytes] : files) total += bytes.size(), largest = std::max<uint64_t>(largest, bytes.size());
  const double target_mb = 0.04;
  const ShardsWritten w = write_shards(m, {.out_dir = dir.file("out"), .prefix = "train", .shard_mb = target_mb, .seed = 5});

  const int64_t n = static_cast<int64_t>(w.shards.size());
  EXPECT_GE(n, static_cast<int64_t>(total / (target_mb * 1e6)));
  EXPECT_LE(n, static_cast<int64_t>(total / (target_mb * 1e6)) + 2);
  int64_t records = 0;
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(fs::path(w.shards[k].file).filename().string(), shard_name("train", k, n, false));
    EXPECT_EQ(fs::file_size(w.shards[k].file), w.shards[k].bytes);
    EXPECT_LE(w.shards[k].bytes, target_mb * 1e6 + largest + 200 * w.shards[k].records) << "shard " << k;
    EXPECT_GE(w.shards[k].bytes + largest, total / n) << "shard " << k;
    records += w.shards[k].records;
  }
  EXPECT_EQ(records, 60);
  EXPECT_EQ(w.examples, 60);

  std::map<std::string, int> seen;
  std::vector<std::string> order;
  for (data::Example& e : tfrecord_dataset(shard_files(w), {.read_ahead = 0}).epoch(0)) {
    const std::string id = e.text("id");
    ++seen[id];
    order.push_back(id);
    const Tensor& bytes = e.tensor("image_bytes");
    EXPECT_EQ(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), files.at(id)) << id;
    EXPECT_EQ(e.tensor("label").data<int32_t>()[0], id[0] == 'c' ? 0 : id[0] == 'd' ? 1 : 2) << id;
  }
  EXPECT_EQ(seen.size(), files.size());
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
  EXPECT_NE(order[0], "cat/0.jpg");  // shuffled across shards, not in folder order
  EXPECT_EQ(read_bytes(dir.file("out/classes.txt")), "cat\ndog\neel\n");
  EXPECT_TRUE(fs::exists(dir.file("out/train-shards.json")));
}

TEST(Shards, SameSeedSameFilesAnotherSeedAnotherOrder) {
  TempDir dir;
  class_tree(dir.file("tree"), 5);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  const auto a = write_shards(m, {.out_dir = dir.file("a"), .shard_mb = 0.01, .seed = 1});
  const auto b = write_shards(m, {.out_dir = dir.file("b"), .shard_mb = 0.01, .seed = 1});
  const auto c = write_shards(m, {.out_dir = dir.file("c"), .shard_mb = 0.01, .seed = 2});
  ASSERT_EQ(a.shards.size(), b.shards.size());
  for (std::size_t k = 0; k < a.shards.size(); ++k)
    EXPECT_EQ(read_bytes(a.shards[k].file), read_bytes(b.shards[k].file));
  EXPECT_NE(read_bytes(a.shards[0].file), read_bytes(c.shards[0].file));
}

TEST(Shards, GzipShardsOfAOneHotCsvReadBack) {
  TempDir dir;
  fs::create_directories(dir.file("pp/images"));
  write_bytes(dir.file("pp/train.csv"), "image_id,healthy,rust\nTrain_0,1,0\nTrain_1,0,1\nTrain_2,0,1\n");
  for (int i = 0; i < 3; ++i) write_bytes(dir.file("pp/images/Train_" + std::to_string(i) + ".jpg"), pattern(3000, i));
  const Manifest m = read_csv_manifest(dir.file("pp/train.csv"));
  const auto w = write_shards(m, {.out_dir = dir.file("out"), .prefix = "pp", .gzip = true});
  ASSERT_EQ(w.shards.size(), 1u);
  EXPECT_EQ(fs::path(w.shards[0].file).filename(), "pp-00000-of-00001.tfrecord.gz");
  EXPECT_LT(fs::file_size(w.shards[0].file), w.shards[0].bytes);  // the framing and keys compress a little
  int i = 0;
  for (data::Example& e : tfrecord_dataset(shard_files(w)).epoch(0)) {
    const int id = e.text("id").back() - '0';
    EXPECT_EQ(e.tensor("label").shape(), Shape{2});
    EXPECT_EQ(e.tensor("label").data<float>()[0], id == 0 ? 1.f : 0.f);
    const Tensor& bytes = e.tensor("image_bytes");
    EXPECT_EQ(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), pattern(3000, id));
    ++i;
  }
  EXPECT_EQ(i, 3);
}

TEST(Shards, AnErrorLeavesNoShardsAndStaleShardsAreRefused) {
  TempDir dir;
  class_tree(dir.file("tree"), 4);
  Manifest m = read_folder_manifest(dir.file("tree"));
  fs::remove(m.entries.back().path);  // vanished after listing
  const std::string msg = error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.005}); });
  EXPECT_NE(msg.find(m.entries.back().path), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.file("out")));  // no shard, and not the folder the call made (an empty one stayed)
  fs::create_directories(dir.file("out"));
  write_bytes(dir.file("out/notes.txt"), "mine");
  EXPECT_NE(error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.005}); }), "(no exception)");
  EXPECT_EQ(fs::directory_iterator(dir.file("out"))->path().filename(), "notes.txt");  // a user's file stays, alone
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("out")), fs::directory_iterator()), 1);
  fs::remove(dir.file("out/notes.txt"));

  m.entries.pop_back();
  write_bytes(dir.file("out/train-00000-of-00009.tfrecord"), "old");
  EXPECT_NE(error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.005}); })
                .find("train-00000-of-00009.tfrecord: shards of an earlier run"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .prefix = "a/b"}); }).find("prefix"),
            std::string::npos);
}

// Each regular file in `folder`, by name, with its bytes.
std::map<std::string, std::string> regular_files_in(const std::string& folder) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::directory_iterator(folder))
    if (f.is_regular_file()) out[f.path().filename().string()] = read_bytes(f.path().string());
  return out;
}

// A re-run into the same folder and prefix that fails part way used to leave
// new shards 0..k-1 beside the old ones k.. and the old -shards.json: the old
// set now stays whole, byte for byte, with no temporary beside it.
TEST(Shards, AReRunThatFailsPartWayLeavesTheEarlierSetWhole) {
  TempDir dir;
  const auto files = class_tree(dir.file("tree"), 3);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  const ShardOptions o{.out_dir = dir.file("out"), .shard_mb = 0.001, .seed = 7};  // one image a shard
  const ShardsWritten first = write_shards(m, o);
  ASSERT_GT(first.shards.size(), 3u);
  auto contents = [&] { return regular_files_in(dir.file("out")); };
  const auto before = contents();
  // The same images with new bytes (same sizes: the same cut into shards),
  // and shard 2 made unwritable: a folder where its file (or the temporary
  // it is renamed from) would go.
  for (const auto& [id, bytes] : files) write_bytes(dir.file("tree/" + id), std::string(bytes.size(), 'x'));
  const std::string third = first.shards[2].file;
  fs::create_directory(convoy::temporary_name(third));
  fs::create_directory(convoy::temporary_name(convoy::temporary_name(third)));
  EXPECT_NE(error_of([&] { write_shards(m, o); }).find(fs::path(third).filename().string()), std::string::npos);
  EXPECT_TRUE(contents() == before);  // shards 0 and 1 not rewritten, no temporary file left
}

// The sidecars are staged with the shards: a -shards.json that cannot be
// written (here a folder where its temporary goes; a full disk alike) used
// to fail after every new shard had replaced the old, leaving a new set
// under the old -shards.json. Now nothing is replaced.
TEST(Shards, ASidecarThatCannotBeWrittenLeavesTheEarlierSetWhole) {
  TempDir dir;
  const auto files = class_tree(dir.file("tree"), 3);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  const ShardOptions o{.out_dir = dir.file("out"), .shard_mb = 0.001, .seed = 7};
  const ShardsWritten first = write_shards(m, o);
  auto contents = [&] { return regular_files_in(dir.file("out")); };
  const auto before = contents();
  for (const auto& [id, bytes] : files) write_bytes(dir.file("tree/" + id), std::string(bytes.size(), 'y'));
  const std::string sidecar = dir.file("out/train-shards.json");
  fs::create_directory(convoy::temporary_name(sidecar));
  fs::create_directory(convoy::temporary_name(convoy::temporary_name(sidecar)));
  EXPECT_NE(error_of([&] { write_shards(m, o); }).find("train-shards.json"), std::string::npos);
  EXPECT_TRUE(contents() == before);  // no shard replaced, no temporary file left
}

// A folder where the last shard itself goes (not its temporary): its rename
// failed after shards 0..k-1 had replaced the earlier set's, so two seeds'
// shards stood mixed under the first run's -shards.json. Every name the set
// takes is now checked before anything is written; a link in the sidecar's
// place likewise.
TEST(Shards, AFolderOrLinkWhereTheSetGoesIsRefusedBeforeAnyShardIsReplaced) {
  TempDir dir;
  class_tree(dir.file("tree"), 3);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  const ShardsWritten first = write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.001, .seed = 7});
  ASSERT_GT(first.shards.size(), 3u);
  const std::string last = first.shards.back().file;
  fs::remove(last);
  fs::create_directory(last);
  auto bytes_of = [&](std::size_t k) { return read_bytes(first.shards[k].file); };
  const std::string shard0 = bytes_of(0);
  const std::string msg = error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.001, .seed = 8}); });
  EXPECT_NE(msg.find(fs::path(last).filename().string() + ": is a folder, not a file convoy may replace"),
            std::string::npos)
      << msg;
  EXPECT_EQ(bytes_of(0), shard0);  // seed 7's shard 0, not seed 8's
  fs::remove(last);
  fs::rename(dir.file("out/train-shards.json"), dir.file("elsewhere.json"));
  fs::create_symlink(dir.file("elsewhere.json"), dir.file("out/train-shards.json"));
  EXPECT_NE(error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .shard_mb = 0.001, .seed = 8}); })
                .find("train-shards.json: is a symbolic link"),
            std::string::npos);
  EXPECT_EQ(bytes_of(0), shard0);
}

// -shards.json holds UTF-8 only: a cp1252 class name or prefix used to throw
// json's type_error ("internal error", exit 1) after every shard was written.
TEST(Shards, NamesTheSidecarCannotHoldAreRefusedBeforeAnyShard) {
  TempDir dir;
  fs::create_directories(dir.file("csv/images"));
  write_bytes(dir.file("csv/images/a.jpg"), pattern(100, 1));
  write_bytes(dir.file("csv/labels.csv"), "image_id,kind\na,caf\xe9\n");
  CsvManifestOptions o;
  o.label_column = "kind";
  o.image_dir = "images";
  o.extension = ".jpg";
  EXPECT_NE(error_of([&] { read_csv_manifest(dir.file("csv/labels.csv"), o); }).find("class name 'caf\\xe9' in column 'kind' is not UTF-8 text"),
            std::string::npos);
  class_tree(dir.file("tree"), 1);
  const Manifest m = read_folder_manifest(dir.file("tree"));
  EXPECT_NE(error_of([&] { write_shards(m, {.out_dir = dir.file("out"), .prefix = "caf\xe9"}); })
                .find("the prefix 'caf\\xe9' must be a non-empty file name in UTF-8"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("out")));
}

}  // namespace convoy::records
