// Hostile input (docs/reliability.md, "Hostile input"): files someone else
// wrote cannot make a reader leave its root, nest without bound, expand
// without bound, read without a size bound, or echo more than a short prefix.
// Every bad input is built here, at test time.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "convoy/core/threads.h"
#include "convoy/core/untrusted.h"
#include "convoy/image/codec.h"
#include "convoy/io/output_folder.h"
#include "convoy/train/history_json.h"
#include "convoy/io/safetensors.h"
#include "convoy/records/csv.h"
#include "convoy/records/manifest.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/train/metrics.h"
#include "convoy/config/run_config.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using convoy::testing::error_of;
using convoy::testing::TempDir;
using records::testing::write_bytes;

const std::string kSecret = "root:secret-content";

// dir/images/{a,b}.jpg, a secret file beside the image folder, and links:
// images/in.jpg -> a.jpg (inside), images/out.jpg -> ../secret.jpg (outside),
// images/sub -> .. (a folder link leading out).
void plant_root(const TempDir& dir) {
  fs::create_directories(dir.file("images"));
  write_bytes(dir.file("images/a.jpg"), "jpeg a");
  write_bytes(dir.file("images/b.jpg"), "jpeg b");
  write_bytes(dir.file("secret.jpg"), kSecret);
  fs::create_symlink("a.jpg", dir.file("images/in.jpg"));
  fs::create_symlink("../secret.jpg", dir.file("images/out.jpg"));
  fs::create_directory_symlink("..", dir.file("images/sub"));
}

// A message a user sees: one line, short, none of the secret's bytes.
void expect_message(const std::string& msg, const std::string& needle) {
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_LT(msg.size(), kMaxMessageChars) << msg;
  EXPECT_EQ(msg.find("secret-content"), std::string::npos) << msg;
}

}  // namespace

TEST(HostileInput, IdsResolveInsideTheirRoot) {
  TempDir dir;
  plant_root(dir);
  const PathRoot root(dir.file("images"));
  EXPECT_FALSE(root.outside("a.jpg"));
  EXPECT_FALSE(root.outside("in.jpg"));           // a link that stays inside
  EXPECT_FALSE(root.outside("missing.jpg"));      // missing is the caller's to say
  EXPECT_FALSE(root.outside("./a.jpg"));
  EXPECT_TRUE(root.outside("../secret.jpg"));     // a '..' segment, even where it would come back
  EXPECT_TRUE(root.outside("sub/../images/a.jpg"));
  EXPECT_TRUE(root.outside(dir.file("secret.jpg")));  // absolute
  EXPECT_TRUE(root.outside(std::string("a.jpg\0/../x", 11)));
  EXPECT_TRUE(root.outside("out.jpg"));           // a link leading out
  EXPECT_TRUE(root.outside("sub/secret.jpg"));    // through a folder link leading out
  EXPECT_TRUE(root.outside("sub/nothing.jpg"));   // through it, even to nothing
  const PathRoot linked_root(dir.file("images/sub"));  // the root itself may be a link
  EXPECT_FALSE(linked_root.outside("secret.jpg"));
  EXPECT_FALSE(PathRoot(dir.file("nowhere")).outside("a.jpg"));
}

TEST(HostileInput, ACsvIdLeadingOutIsABadRowFailedOrSkipped) {
  TempDir dir;
  plant_root(dir);
  const std::string csv = dir.file("train.csv");
  write_bytes(csv, "image_id,cat,dog\na,1,0\n../secret,0,1\n" + dir.file("secret") + ",1,0\nout,0,1\nsub/secret,1,0\nb,0,1\n");
  records::CsvManifestOptions o;
  o.extension = ".jpg";
  const std::string msg = error_of([&] { records::read_csv_manifest(csv, o); });
  expect_message(msg, "train.csv: line 3: image_id '../secret' leads outside the image folder");
  EXPECT_NE(msg.find("on_bad_example: skip"), std::string::npos) << msg;

  std::vector<std::string> log;
  o.on_bad_example = data::OnBadExample::skip;
  o.log = [&](const std::string& line) { log.push_back(line); };
  const records::Manifest m = records::read_csv_manifest(csv, o);
  ASSERT_EQ(m.entries.size(), 2u);  // a and b
  ASSERT_EQ(m.skipped.size(), 4u);
  for (const std::string& s : m.skipped) expect_message(s, "leads outside the image folder");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("skipped 4 bad rows"), std::string::npos) << log[0];
  // What is read is what the manifest names: nothing of the secret.
  for (data::Example& e : records::manifest_dataset(m).epoch(0)) {
    const Tensor& bytes = e.tensor("image_bytes");
    EXPECT_NE(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), kSecret);
  }
}

TEST(HostileInput, AClassFolderFileLinkedOutIsRefused) {
  TempDir dir;
  fs::create_directories(dir.file("root/cat"));
  fs::create_directories(dir.file("root/dog"));
  write_bytes(dir.file("root/cat/1.jpg"), "jpeg");
  write_bytes(dir.file("root/dog/1.jpg"), "jpeg");
  write_bytes(dir.file("secret.jpg"), kSecret);
  EXPECT_EQ(records::read_folder_manifest(dir.file("root")).entries.size(), 2u);
  fs::create_symlink("../cat/1.jpg", dir.file("root/dog/2.jpg"));  // inside: fine
  EXPECT_EQ(records::read_folder_manifest(dir.file("root")).entries.size(), 3u);
  fs::create_symlink("../../secret.jpg", dir.file("root/dog/3.jpg"));
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root")); }),
                 "root: dog/3.jpg: leads outside the data folder");
  std::vector<std::string> log;
  const records::Manifest m = records::read_folder_manifest(
      dir.file("root"), {.on_bad_example = data::OnBadExample::skip, .log = [&](const std::string& l) { log.push_back(l); }});
  EXPECT_EQ(m.entries.size(), 3u);
  ASSERT_EQ(m.skipped.size(), 1u);
  expect_message(m.skipped[0], "root: dog/3.jpg: leads outside the data folder");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("root: skipped 1 bad file: dog/3.jpg: leads outside"), std::string::npos) << log[0];
  fs::remove(dir.file("root/dog/3.jpg"));
  fs::create_directory_symlink(dir.path(), dir.file("root/bird"));  // a class folder linked out
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root")); }),
                 "root: class folder 'bird' leads outside the data folder (it is a symbolic link");
}

// A class folder is checked before it is walked: one linked to '/' (or named
// '/' or '../x' in data.classes) is refused at once, not after listing the
// whole file system (which ended in "Permission denied at .../proc/1/fd/0").
TEST(HostileInput, AClassFolderLeadingOutIsRefusedBeforeItsWalk) {
  TempDir dir;
  fs::create_directories(dir.file("root/cat"));
  write_bytes(dir.file("root/cat/1.jpg"), "jpeg");
  fs::create_directory_symlink("/", dir.file("root/everything"));
  for (auto policy : {data::OnBadExample::fail, data::OnBadExample::skip})
    expect_message(error_of([&] { records::read_folder_manifest(dir.file("root"), {.on_bad_example = policy}); }),
                   "root: class folder 'everything' leads outside the data folder");
  fs::remove(dir.file("root/everything"));
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root"), {.classes = {"cat", "/"}}); }),
                 "root: class folder '/' leads outside the data folder (it is an absolute path)");
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root"), {.classes = {"cat", "../x"}}); }),
                 "class folder '../x' leads outside the data folder (it has a '..' segment)");
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root"), {.classes = {"cat", "cat"}}); }),
                 "root: data.classes names 'cat' twice");
  // Links that loop: at the root no class, below a class folder a bad file
  // when named as an image (else nothing); never "cannot list the folder".
  fs::create_symlink("loop", dir.file("root/loop"));
  fs::create_symlink("spin.jpg", dir.file("root/cat/spin.jpg"));
  fs::create_symlink("spin", dir.file("root/cat/spin"));
  expect_message(error_of([&] { records::read_folder_manifest(dir.file("root")); }),
                 "root: cat/spin.jpg: a link that cannot be followed (Too many levels of symbolic links)");
  const records::Manifest m = records::read_folder_manifest(
      dir.file("root"), {.on_bad_example = data::OnBadExample::skip, .log = [](const std::string&) {}});
  EXPECT_EQ(m.classes, std::vector<std::string>{"cat"});
  EXPECT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.skipped.size(), 1u);
}

// A FIFO named like an image would block its open forever (waiting for a
// writer); it, a folder and a device are refused by the one image reader.
TEST(HostileInput, AnImageNameThatIsNoFileIsRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("pipe.jpg").c_str(), 0644), 0);
  fs::create_directories(dir.file("folder.jpg"));
  expect_message(error_of([&] { image::read_image_file(dir.file("pipe.jpg")); }),
                 "pipe.jpg: not a regular file (a pipe, socket or device); name an image");
  expect_message(error_of([&] { image::read_image_file(dir.file("folder.jpg")); }),
                 "folder.jpg: is a folder; name an image");
  expect_message(error_of([&] { image::read_image_file("/dev/zero"); }), "/dev/zero: not a regular file");
}

TEST(HostileInput, AForeignFileIsNamedButNotShown) {
  const std::string passwd = "root:x:0:0:root:/root:/bin/bash\n";
  const std::string msg = error_of([&] {
    image::decode_image({reinterpret_cast<const uint8_t*>(passwd.data()), passwd.size()}, "x.jpg");
  });
  expect_message(msg, "x.jpg: not a JPEG or PNG image");
  EXPECT_EQ(msg.find("0x72"), std::string::npos) << msg;
}

TEST(HostileInput, JsonNestingIsBoundedAndNeverWrittenOutWhole) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  expect_message(error_of([&] { parse_json_bounded(deep, "x.json: not valid JSON"); }),
                 "x.json: not valid JSON (nested deeper than 64 levels");
  EXPECT_NO_THROW(parse_json_bounded(std::string(60, '[') + std::string(60, ']'), "x"));
  // A safetensors header whose shape (or dtype) is nested 100,000 deep.
  for (const char* key : {"shape", "dtype"}) {
    const std::string header = std::string(R"({"w": {"data_offsets": [0, 4], )") +
                               (key == std::string("shape") ? R"("dtype": "F32", "shape": )" : R"("shape": [1], "dtype": )") +
                               deep + "}}";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + std::string(4, '\0');
    expect_message(error_of([&] { io::parse_safetensors(file, "m.safetensors"); }),
                   "m.safetensors: bad safetensors header (nested deeper than 64 levels");
  }
  // Values nested within the limit but wide are shown cut.
  nlohmann::json wide = nlohmann::json::array();
  for (int i = 0; i < 100'000; ++i) wide.push_back(i);
  EXPECT_LE(shown_json(wide).size(), kShownChars + 8);
  expect_message(error_of([&] {
                   train::parse_run_config(R"({"training": {"epochs": )" + wide.dump() + "}}", "c.json", false);
                 }),
                 "c.json: 'training.epochs' must be a whole number, got [0, 1, 2");
  expect_message(error_of([&] { train::parse_run_config("{\"training\": " + deep + "}", "c.json", false); }),
                 "c.json: not valid JSON (nested deeper than 64 levels");
}

TEST(HostileInput, AYamlAliasBombIsRefusedInOneLine) {
  // Each level holds ten aliases of the one before: 10^9 values when expanded.
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += (k ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  ASSERT_LT(yaml.size(), 1024u);
  expect_message(error_of([&] { train::parse_run_config(yaml, "bomb.yaml", true); }),
                 "bomb.yaml: the YAML expands to more than 100000 values");
  std::string nested;
  for (int i = 0; i < 100; ++i) nested += std::string(i * 2, ' ') + "k:\n";
  expect_message(error_of([&] { train::parse_run_config(nested, "deep.yaml", true); }),
                 "deep.yaml: the YAML nests deeper than 64 levels");
}

TEST(HostileInput, AKeyGivenTwiceIsAnErrorNamingIt) {
  expect_message(error_of([] { train::parse_run_config("training:\n  epochs: 1\n  epochs: 2\n", "c.yaml", true); }),
                 "c.yaml: the key 'epochs' appears twice");
  expect_message(
      error_of([] { train::parse_run_config(R"({"training": {"epochs": 1, "epochs": 2}})", "c.json", false); }),
      "c.json: not valid JSON (the key 'epochs' appears twice");
}

TEST(HostileInput, AnImageOverTheByteLimitIsRefusedBeforeItIsRead) {
  TempDir dir;
  const std::string big = dir.file("big.jpg");
  { std::FILE* f = std::fopen(big.c_str(), "wb"); ASSERT_TRUE(f); std::fclose(f); }
  fs::resize_file(big, uint64_t{2} << 30);  // 2 GiB, sparse: no disk, and no memory if never read
  const std::string msg = error_of([&] { image::read_image_file(big); });
  expect_message(msg, "big.jpg: 2147483648 bytes, more than the 67108864 an image may have (data.max_image_bytes)");
  expect_message(error_of([&] { image::read_image(big); }), "more than the 67108864");
  expect_message(error_of([&] { image::read_image_file(big, 1000, "t.csv line 2"); }),
                 "big.jpg (t.csv line 2): 2147483648 bytes, more than the 1000");
}

TEST(HostileInput, CsvValuesAreEchoedCutAndRowsAreBounded) {
  TempDir dir;
  fs::create_directories(dir.file("images"));
  write_bytes(dir.file("images/a.jpg"), "jpeg");
  const std::string huge(10'000'000, 'v');
  write_bytes(dir.file("t.csv"), "image_id,cat,dog\na," + huge + ",0\n");
  const std::string msg = error_of([&] { records::read_csv_manifest(dir.file("t.csv")); });
  expect_message(msg, "column 'cat' holds 'vvvv");
  EXPECT_NE(msg.find("(10000000 bytes)"), std::string::npos) << msg;
  // A line of ten million commas stops at the field limit.
  const std::string commas = "id\n" + std::string(10'000'000, ',') + "\n";
  expect_message(error_of([&] { records::parse_csv(commas, "c.csv"); }), "c.csv: line 2: more than 65536 fields");
  // Values with line ends or control bytes stay on one line.
  EXPECT_EQ(shown(std::string_view("a\nb\x01\xff", 5)), "a\\nb\\x01\\xff");
  EXPECT_EQ(shown("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 kept
  EXPECT_EQ(one_line(std::string(1000, 'x') + " do this").size(), kMaxMessageChars);
  // A message quoting a shown value keeps its escapes as they are (not "\\\\x00").
  const std::string quoted = "no image for id '" + shown(std::string("Train_9\0x", 9)) + "'";
  EXPECT_EQ(quoted, "no image for id 'Train_9\\x00x'");
  EXPECT_EQ(one_line(quoted + "\nsecond line"), quoted + "\\nsecond line");
}

}  // namespace convoy

// Class 9: what a blown-up run produces is total for the metrics and reads back.
namespace convoy {

TEST(HostileInput, MetricsAreTotalOverNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> scores = {0.1f, nan, 0.7f, nan, 0.3f};
  const std::vector<uint8_t> truth = {0, 1, 1, 0, 1};
  EXPECT_TRUE(std::isnan(train::roc_auc(scores, truth)));  // returns (it used to spin forever)
  const std::vector<float> all_nan(1000, nan);
  EXPECT_TRUE(std::isnan(train::roc_auc(all_nan, std::vector<uint8_t>(1000, 1))));
  // A row of NaN scores is never a hit, whatever k.
  const std::vector<float> rows = {nan, nan, nan, 0.1f, 0.8f, 0.1f};
  EXPECT_DOUBLE_EQ(train::top_k_accuracy(rows, 3, std::vector<int32_t>{0, 1}, 3), 0.5);
}

TEST(HostileInput, AHistoryWithNaNFiguresReadsBack) {
  train::History h;
  h.epochs.push_back({.epoch = 1, .train_loss = std::numeric_limits<double>::quiet_NaN(), .train_accuracy = 0.1,
                      .test_loss = std::numeric_limits<double>::quiet_NaN(),
                      .test_accuracy = std::numeric_limits<double>::quiet_NaN(), .train_seconds = 1,
                      .images_per_second = 10, .lr = 1e30, .input_wait_seconds = 0});
  const train::History back = train::parse_history_json(train::history_json(h), "h");
  ASSERT_EQ(back.epochs.size(), 1u);
  EXPECT_TRUE(std::isnan(back.epochs[0].test_loss));
  EXPECT_TRUE(std::isnan(back.epochs[0].train_loss));
  EXPECT_EQ(back.epochs[0].lr, 1e30);
}

TEST(HostileInput, ALearningRateARunMayUseItsCheckpointsMayHold) {
  train::RunConfig c;
  c.lr = 1e30;
  EXPECT_NO_THROW(train::validate(c));
  c.lr = 1e39;  // no float holds it
  expect_message(error_of([&] { train::validate(c); }), "optimizer.lr (--lr) must be positive and finite");
  c.lr = 1e30;
  io::Metadata meta{{"format", "convoy-checkpoint-2"},
                    {"config", train::run_config_json(c)},
                    {"history", train::history_json({})},
                    {"position", nlohmann::json{{"epoch", 0}, {"step", 3}, {"loss_sum", 1.0}, {"correct", 0},
                                                {"count", 3}, {"train_seconds", 1.0}, {"input_wait_seconds", 0.0},
                                                {"lr", static_cast<double>(static_cast<float>(1e30))}}
                                     .dump()}};
  EXPECT_NEAR(train::parse_checkpoint_metadata(meta, "ck").lr, 1e30f, 1e24f);
}

}  // namespace convoy

// Classes 8 and 10: the output folder's guard and lock.
namespace convoy {

TEST(HostileInput, AFailedRunRemovesOnlyWhatItWrote) {
  TempDir dir;
  const std::string out = dir.file("out");
  fs::create_directories(out);
  write_bytes(out + "/mine.txt", "a user's file");
  try {
    io::FolderGuard guard(out, {"checkpoint.safetensors"}, {"history.csv", "tensorboard"});
    write_bytes(out + "/history.csv", "epoch\n");
    fs::create_directories(out + "/tensorboard");
    write_bytes(out + "/x.convoy-tmp.1", "");
    write_bytes(out + "/other.txt", "another program's, written meanwhile");
    throw UserError("the run failed");
  } catch (const UserError&) {
  }
  EXPECT_TRUE(fs::exists(out + "/mine.txt"));
  EXPECT_TRUE(fs::exists(out + "/other.txt"));
  EXPECT_FALSE(fs::exists(out + "/history.csv"));
  EXPECT_FALSE(fs::exists(out + "/tensorboard"));
  EXPECT_FALSE(fs::exists(out + "/x.convoy-tmp.1"));

  const std::string fresh = dir.file("fresh");  // made by the run: removed with it
  try {
    io::FolderGuard guard(fresh, {"checkpoint.safetensors"}, {"history.csv"});
    fs::create_directories(fresh);
    write_bytes(fresh + "/history.csv", "epoch\n");
    throw UserError("the run failed");
  } catch (const UserError&) {
  }
  EXPECT_FALSE(fs::exists(fresh));

  try {  // a checkpoint was written: everything stays, for --resume
    io::FolderGuard guard(fresh, {"checkpoint.safetensors"}, {"history.csv"});
    fs::create_directories(fresh);
    write_bytes(fresh + "/history.csv", "epoch\n");
    write_bytes(fresh + "/checkpoint.safetensors", "ck");
    throw UserError("the run failed later");
  } catch (const UserError&) {
  }
  EXPECT_TRUE(fs::exists(fresh + "/history.csv"));

  {  // no exception: nothing is removed
    io::FolderGuard guard(dir.file("ok"), {"checkpoint.safetensors"}, {"history.csv"});
    fs::create_directories(dir.file("ok"));
    write_bytes(dir.file("ok/history.csv"), "epoch\n");
  }
  EXPECT_TRUE(fs::exists(dir.file("ok/history.csv")));
}

TEST(HostileInput, OneRunHoldsAnOutputFolder) {
  TempDir dir;
  {
    io::OutputLock first(dir.path());
    const std::string msg = error_of([&] { io::OutputLock second(dir.path()); });
    expect_message(msg, "another run is writing to this folder (convoy pid " + std::to_string(::getpid()) + " on ");
  }
  EXPECT_FALSE(fs::exists(dir.file(io::kLockFile)));  // gone with its run
  write_bytes(dir.file(io::kLockFile), "convoy pid 999999 on elsewhere");  // a killed run's: nobody holds it
  EXPECT_NO_THROW(io::OutputLock taken_over(dir.path()));
}

}  // namespace convoy

namespace convoy {

TEST(HostileInput, FilesReadWholeAreSizeBoundedBeforeReading) {
  TempDir dir;
  for (const char* name : {"big.csv", "big.yaml"}) {
    std::FILE* f = std::fopen(dir.file(name).c_str(), "wb");
    ASSERT_TRUE(f);
    std::fclose(f);
    fs::resize_file(dir.file(name), (uint64_t{1} << 30) + 1);  // sparse
  }
  expect_message(error_of([&] { records::read_csv(dir.file("big.csv")); }),
                 "big.csv: 1073741825 bytes, more than the 1073741824 a CSV file may have");
  expect_message(error_of([&] { train::load_run_config(dir.file("big.yaml")); }),
                 "big.yaml: 1073741825 bytes, more than the 16777216 a run config may have");
  // What has no size before it is read: a device never ends (it ran out of
  // memory), a pipe is read up to the limit, one nobody writes to is not empty.
  expect_message(error_of([&] { train::load_run_config("/dev/zero"); }), "/dev/zero: not a regular file (a device or socket); name a run config");
  expect_message(error_of([&] { io::read_safetensors("/dev/zero"); }), "/dev/zero: not a regular file (a device or socket)");
  expect_message(error_of([&] { read_file_bounded(dir.path(), 10, "CSV file"); }), ": is a folder; name a CSV file");
  ASSERT_EQ(::mkfifo(dir.file("quiet.yaml").c_str(), 0644), 0);
  expect_message(error_of([&] { train::load_run_config(dir.file("quiet.yaml")); }),
                 "quiet.yaml: a pipe that gave nothing (does a program write to it?)");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    const std::string chunk(4096, 'x');
    for (int i = 0; i < 8; ++i)
      if (::write(fds[1], chunk.data(), chunk.size()) < 0) break;  // the reader stops after its limit
    ::close(fds[1]);
  });
  const std::string piped = "/dev/fd/" + std::to_string(fds[0]);
  expect_message(error_of([&] { read_file_bounded(piped, 10000, "ONNX file"); }),
                 "bytes, more than the 10000 an ONNX file may have");
  // The read end stays open until the writer is done (its 32 KiB fit in the
  // pipe's buffer), so no write can meet a closed pipe and raise SIGPIPE.
  writer.join();
  ::close(fds[0]);
}

TEST(HostileInput, AbsurdThreadCountsAreRefusedBeforeAnyStarts) {
  const int before = configured_threads();
  const std::string msg = error_of([] { set_num_threads(100000); });
  expect_message(msg, "training.threads (--threads) 100000: more worker threads than convoy starts (");
  EXPECT_EQ(configured_threads(), before);  // the refused count was never applied
}

TEST(HostileInput, LiesWithinResolvesDotsAndLinks) {
  TempDir dir;
  fs::create_directories(dir.file("data/a"));
  fs::create_directory_symlink(dir.file("data/a"), dir.file("alias"));
  EXPECT_TRUE(lies_within(dir.file("data"), dir.file("data")));
  EXPECT_TRUE(lies_within(dir.file("data/a/run1"), dir.file("data")));
  EXPECT_TRUE(lies_within(dir.file("alias/run1"), dir.file("data")));
  EXPECT_TRUE(lies_within(dir.file("data/a/../b"), dir.file("data")));
  EXPECT_FALSE(lies_within(dir.file("data/../out"), dir.file("data")));
  EXPECT_FALSE(lies_within(dir.file("database"), dir.file("data")));
}

}  // namespace convoy
