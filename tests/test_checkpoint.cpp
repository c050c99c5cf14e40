// Checkpoints: exact positions, a checksum that catches damage, a kept
// predecessor to fall back to, mid-epoch resume that is bit-identical, and
// one clear UserError for every kind of bad file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "convoy/backends/executable_internals.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/io/atomic_file.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/train/fit.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }
void flip_byte(const std::string& path, std::size_t from_end) {
  std::string bytes = read(path);
  bytes[bytes.size() - from_end] ^= 0x01;
  write(path, bytes);
}

std::vector<float> params_of(const Executable& exe) { return exe.internals().copy_of(Held::parameters); }

// A compiled seed CNN with an SGD velocity, as a run would checkpoint it.
struct Saved {
  nn::Sequential model = nn::seed_cnn();
  RunConfig config;
  std::unique_ptr<Executable> exe = compile_cpu(model, {.batch_size = 8, .optimizer = optimizer_options(config)}, 3);
  History history;
  Saved() { history.epochs.push_back({.epoch = 1, .train_loss = 0.5, .lr = 0.01}); }
  void save(const std::string& path, int64_t step, bool keep_previous = false) {
    const EpochProgress p{.step = step, .metrics = {.loss_sum = 1.0 / 3.0 + step, .correct = 5, .count = 8 * step},
                          .train_seconds = 0.25};
    save_checkpoint(path, model, *exe, history,
                    {.config = run_config_json(config), .progress = p, .keep_previous = keep_previous});
  }
};

}  // namespace

TEST(Checkpoint, RoundTripsThePositionMetricSumsAndLearningRateExactly) {
  testing::TempDir dir;
  Saved s;
  s.exe->set_learning_rate(0.0123456789f);
  s.save(dir.file(kCheckpointFile), 7);
  const Checkpoint c = load_checkpoint(dir.file(kCheckpointFile));
  EXPECT_EQ(c.epoch, 1);
  EXPECT_EQ(c.progress.step, 7);
  EXPECT_EQ(c.progress.metrics.loss_sum, 1.0 / 3.0 + 7);  // bit for bit
  EXPECT_EQ(c.progress.metrics.correct, 5);
  EXPECT_EQ(c.progress.metrics.count, 56);
  EXPECT_EQ(c.lr, 0.0123456789f);
  EXPECT_EQ(c.params, params_of(*s.exe));
  EXPECT_EQ(c.history.epochs.size(), 1u);
}

TEST(Checkpoint, AnyFlippedByteFailsTheIntegrityCheck) {
  testing::TempDir dir;
  Saved s;
  s.save(dir.file("c.safetensors"), 1);
  const std::string good = read(dir.file("c.safetensors"));
  for (std::size_t from_end : {std::size_t{1}, good.size() / 2, good.size() - 200}) {
    write(dir.file("bad.safetensors"), good);
    flip_byte(dir.file("bad.safetensors"), from_end);
    EXPECT_THROW(load_checkpoint(dir.file("bad.safetensors")), UserError) << "flipped at -" << from_end;
  }
  write(dir.file("bad.safetensors"), good);
  flip_byte(dir.file("bad.safetensors"), 1);
  EXPECT_NE(testing::error_of([&] { load_checkpoint(dir.file("bad.safetensors")); }).find("checksum mismatch"),
            std::string::npos);
}

TEST(Checkpoint, KeepsThePreviousAndFallsBackToItWithOneWarning) {
  testing::TempDir dir;
  Saved s;
  s.save(dir.file(kCheckpointFile), 3, /*keep_previous=*/true);
  EXPECT_FALSE(fs::exists(dir.file(kPreviousCheckpointFile)));  // nothing to keep yet
  s.save(dir.file(kCheckpointFile), 6, /*keep_previous=*/true);
  std::ostringstream warn;
  EXPECT_EQ(load_latest_checkpoint(dir.path(), warn).progress.step, 6);
  EXPECT_EQ(warn.str(), "");

  flip_byte(dir.file(kCheckpointFile), 10);
  const Checkpoint c = load_latest_checkpoint(dir.path(), warn);
  EXPECT_EQ(c.progress.step, 3);  // the previous one
  const std::string warning = warn.str();
  EXPECT_NE(warning.find("checksum mismatch"), std::string::npos) << warning;
  EXPECT_NE(warning.find(kPreviousCheckpointFile), std::string::npos);
  EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1);

  fs::remove(dir.file(kCheckpointFile));  // a move-based rotation was killed half-way
  EXPECT_EQ(load_latest_checkpoint(dir.path(), warn).progress.step, 3);

  write(dir.file(kCheckpointFile), "junk");
  flip_byte(dir.file(kPreviousCheckpointFile), 10);
  const std::string both = testing::error_of([&] { load_latest_checkpoint(dir.path(), warn); });
  EXPECT_NE(both.find(kCheckpointFile), std::string::npos) << both;
  EXPECT_NE(both.find(kPreviousCheckpointFile), std::string::npos) << both;
  EXPECT_EQ(both.find('\n'), std::string::npos);

  testing::TempDir empty;
  EXPECT_NE(testing::error_of([&] { load_latest_checkpoint(empty.path(), warn); }).find("no checkpoint.safetensors"),
            std::string::npos);
}

// train/ keeps what its caller records of the run as text and never reads
// it: a library user's checkpoint, of any config or none, reads back through
// the model it was written from.
TEST(Checkpoint, TheTrainingLibraryKeepsTheConfigAsTextAndMatchesTensorsToTheModel) {
  testing::TempDir dir;
  Saved s;
  s.exe->set_learning_rate(0.5f);
  const std::string mine = R"({"trainer":"my own","lr":0.5})";
  save_checkpoint(dir.file("c.safetensors"), s.model, *s.exe, s.history, {.config = mine});
  CheckpointFile f = parse_checkpoint_file(read(dir.file("c.safetensors")), "c.safetensors");
  EXPECT_EQ(f.config, mine);
  EXPECT_EQ(f.checkpoint.lr, 0.5f);
  EXPECT_EQ(f.checkpoint.epoch, 1);
  const Checkpoint c = checkpoint_of(f, s.model, optimizer_options(s.config), "c.safetensors");
  EXPECT_EQ(c.params, params_of(*s.exe));
  EXPECT_EQ(c.state, s.exe->internals().copy_of(Held::state));
  EXPECT_EQ(c.optimizer_state, s.exe->internals().copy_of(Held::optimizer_state));
  EXPECT_FALSE(c.optimizer_state.empty());

  // Another model, or another optimizer, is one UserError naming the file.
  const nn::Sequential other({1, 28, 28}, {nn::Flatten{}, nn::Dense{.units = 10}});
  for (const std::string& error :
       {testing::error_of([&] { checkpoint_of(f, other, optimizer_options(s.config), "c.safetensors"); }),
        testing::error_of([&] { checkpoint_of(f, s.model, {.kind = optim::Kind::adam}, "c.safetensors"); })}) {
    EXPECT_NE(error.find("c.safetensors"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // A run's reader needs a run config there, and says so in one line.
  const std::string run_error = testing::error_of([&] { load_checkpoint(dir.file("c.safetensors")); });
  EXPECT_NE(run_error.find("(config)"), std::string::npos) << run_error;
}

// Bad files of every kind: one UserError naming the file, never a crash.
TEST(Checkpoint, BadFilesAreOneClearUserErrorEach) {
  testing::TempDir dir;
  Saved s;
  s.save(dir.file("good.safetensors"), 2);
  const std::string good = read(dir.file("good.safetensors"));
  auto le64 = [](uint64_t v) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
    return out;
  };
  auto with_header = [&](const std::string& json) { return le64(json.size()) + json; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"truncated header length", good.substr(0, 5)},
      {"truncated data", good.substr(0, good.size() - 64)},
      {"wrong magic", std::string("PK\3\4 this is a zip file, not safetensors")},
      {"huge header length", le64(uint64_t{1} << 62) + "{}"},
      {"huge declared shape", with_header(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})") + "abcd"},
      {"negative size", with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})") + "abcd"},
      {"negative offset", with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})") + "abcd"},
      {"float size", with_header(R"({"w":{"dtype":"F32","shape":[1e300],"data_offsets":[0,4]}})") + "abcd"},
      {"non-UTF-8 name", with_header("{\"w\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}") + "abcd"},
      {"not a checkpoint", with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + "abcd"},
      {"header not an object", with_header("[1,2,3]")},
  };
  for (const auto& [name, bytes] : cases) {
    const std::string path = dir.file("case.safetensors");
    write(path, bytes);
    const std::string message = testing::error_of([&] { load_checkpoint(path); });
    EXPECT_NE(message.find(path), std::string::npos) << name << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << name;
  }
}

// Metadata numbers that a plain JSON get<> would convert with undefined
// behaviour (1e300 into an integer) or that contradict each other.
TEST(Checkpoint, MetadataOutOfRangeOrInconsistentIsAUserError) {
  Saved s;
  testing::TempDir dir;
  s.save(dir.file("c.safetensors"), 2);
  io::Metadata meta;
  io::read_safetensors(dir.file("c.safetensors"), &meta);
  EXPECT_EQ(parse_checkpoint_metadata(meta, "m").progress.step, 2);
  auto broken = [&](const std::string& key, const std::string& from, const std::string& to) {
    io::Metadata m = meta;
    const auto at = m[key].find(from);
    EXPECT_NE(at, std::string::npos) << key << " has no " << from;
    if (at != std::string::npos) m[key].replace(at, from.size(), to);
    return testing::error_of([&] { parse_checkpoint_metadata(m, "m"); });
  };
  EXPECT_NE(broken("history", "\"epoch\":1", "\"epoch\":1e300").find("m: bad training history"), std::string::npos);
  EXPECT_NE(broken("position", "\"step\":2", "\"step\":-2").find("'step'"), std::string::npos);
  EXPECT_NE(broken("position", "\"epoch\":1", "\"epoch\":5").find("does not match its history"), std::string::npos);
  EXPECT_NE(broken("position", "\"count\":16", "\"count\":1").find("does not match"), std::string::npos);
  EXPECT_NE(broken("format", "convoy-checkpoint-2", "convoy-checkpoint-9").find("not a convoy checkpoint"),
            std::string::npos);
}

// The library-level proof of exact resume: a fit interrupted mid-epoch and
// resumed from its checkpoint ends bit-identical to one never interrupted.
TEST(Checkpoint, AFitResumedMidEpochEndsBitIdentical) {
  static const data::TrainTest d = data::load_fashion_mnist(data::kFashionMnistDir);
  const auto train = data::take(d.train, 256), test = data::take(d.test, 64);  // 8 steps an epoch
  const nn::Sequential model = nn::seed_cnn();
  RunConfig config;
  config.batch_size = 32;
  const CompileOptions options{.batch_size = 32, .optimizer = optimizer_options(config)};

  auto full = compile_cpu(model, options, 4);
  const History uninterrupted = fit(*full, train, test, {.epochs = 2, .seed = 9});

  struct StopAt : Callback {
    void on_step_end(FitState& s) override { s.interrupted = s.epoch == 2 && s.step == 5; }
  };
  testing::TempDir dir;
  auto cut = compile_cpu(model, options, 4);
  const History stopped =
      fit(*cut, train, test,
          {.epochs = 2, .seed = 9, .callbacks = {std::make_shared<StopAt>(),
                                                 std::make_shared<CheckpointSaver>(dir.file(kCheckpointFile), model,
                                                                                   run_config_json(config))}});
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.epochs.size(), 1u);

  const Checkpoint c = load_checkpoint(dir.file(kCheckpointFile));
  EXPECT_EQ(c.epoch, 1);
  EXPECT_EQ(c.progress.step, 5);
  auto resumed = compile_cpu(model, options, 77);  // another seed: everything must come from the checkpoint
  resumed->internals().write(Held::parameters, c.params);
  resumed->internals().write(Held::state, c.state);
  resumed->internals().write(Held::optimizer_state, c.optimizer_state);
  resumed->set_learning_rate(c.lr);
  const History after = fit(*resumed, train, test,
                            {.epochs = 2, .seed = 9, .initial_epoch = c.epoch, .initial_progress = c.progress}, c.history);
  EXPECT_EQ(params_of(*resumed), params_of(*full));
  ASSERT_EQ(after.epochs.size(), 2u);
  EXPECT_EQ(after.epochs[1].train_loss, uninterrupted.epochs[1].train_loss);  // the partial sums carried on exactly
  EXPECT_EQ(after.epochs[1].train_accuracy, uninterrupted.epochs[1].train_accuracy);
  EXPECT_EQ(after.epochs[1].test_loss, uninterrupted.epochs[1].test_loss);
}

TEST(AtomicFile, KeepsThePreviousVersionAndLeavesNoTemporaries) {
  testing::TempDir dir;
  const io::AtomicWriteOptions keep{.keep_previous_as = dir.file("a.prev")};
  io::write_file_atomic(dir.file("a"), "one", keep);
  io::write_file_atomic(dir.file("a"), "two", keep);
  io::write_file_atomic(dir.file("a"), "three", keep);
  EXPECT_EQ(read(dir.file("a")), "three");
  EXPECT_EQ(read(dir.file("a.prev")), "two");
  const auto files = std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator());
  EXPECT_EQ(files, 2);  // a and a.prev: no temporaries
}

TEST(AtomicFile, AFailedWriteLeavesTheOldContentAndNamesThePath) {
  testing::TempDir dir;
  io::write_file_atomic(dir.file("a"), "old");
  fs::create_directory(io::temporary_name(dir.file("a")));  // the temporary cannot be created
  const std::string message = testing::error_of([&] { io::write_file_atomic(dir.file("a"), "new"); });
  EXPECT_NE(message.find(dir.file("a")), std::string::npos) << message;
  EXPECT_EQ(read(dir.file("a")), "old");
}

TEST(AtomicFile, RemovesTheTemporariesOfDeadWritersOnly) {
  testing::TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // now a pid no process has
  const std::string dead = std::to_string(child);
  write(dir.file("checkpoint.safetensors.convoy-tmp." + dead), "killed mid-write");
  write(io::temporary_name(dir.file("checkpoint.safetensors")), "ours, in progress");
  write(dir.file("notes.tmp.txt"), "not a temporary of ours");
  // A user's own files, whatever they look like, are never removed (issue 18, class 7).
  write(dir.file("thesis.tmp." + dead), "a user's file named like an old convoy temporary");
  write(dir.file("thesis.tmp.4000000"), "and another");
  fs::create_directory(dir.file("folder.convoy-tmp." + dead));
  EXPECT_EQ(io::remove_stale_temporaries(dir.path()), 1);
  EXPECT_FALSE(fs::exists(dir.file("checkpoint.safetensors.convoy-tmp." + dead)));
  EXPECT_TRUE(fs::exists(io::temporary_name(dir.file("checkpoint.safetensors"))));
  EXPECT_TRUE(fs::exists(dir.file("notes.tmp.txt")));
  EXPECT_TRUE(fs::exists(dir.file("thesis.tmp." + dead)));
  EXPECT_TRUE(fs::exists(dir.file("thesis.tmp.4000000")));
  EXPECT_TRUE(fs::exists(dir.file("folder.convoy-tmp." + dead)));
}

// fuzz_checkpoint's seeds (fuzz/make_seed_corpus.py runs this): checkpoints
// of a model small enough for libFuzzer's 64 KiB inputs, built from the
// config the file records, so that parse_checkpoint gets all the way through.
TEST(CheckpointFuzzSeeds, Write) {
  const char* dir = std::getenv("CONVOY_CHECKPOINT_SEED_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_CHECKPOINT_SEED_DIR (fuzz/make_seed_corpus.py does)";
  const RunConfig config = parse_run_config(
      "model: {layers: [{type: max_pool2d, kernel: 4}, batch_norm, flatten, {type: dense, units: 3}, log_softmax]}\n"
      "optimizer: {name: adamw, lr: 0.01}\ntraining: {epochs: 3}\n",
      "seed.yaml", /*yaml=*/true);
  const nn::Model model = build_model(config, model_input_shape(config), model_classes(config));
  const auto exe = compile_cpu(model, {.batch_size = 8, .optimizer = optimizer_options(config)}, 3);
  History history;
  for (const int64_t epoch : {1, 2}) {
    history.epochs.push_back({.epoch = epoch, .train_loss = 0.5, .lr = 0.01});
    save_checkpoint(std::string(dir) + "/epoch_" + std::to_string(epoch) + ".safetensors", model, *exe, history,
                    {.config = run_config_json(config),
                     .progress = {.step = 3 * epoch, .metrics = {.loss_sum = 1.5, .correct = 5, .count = 8}}});
  }
  EXPECT_NO_THROW(load_checkpoint(std::string(dir) + "/epoch_2.safetensors"));
}

}  // namespace convoy::train
