// report::write_run_report: the report files of a run a program fitted
// itself (KerasModel), the same files `convoy train --out` writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "convoy/data/fashion_mnist.h"
#include "convoy/nn/zoo.h"
#include "convoy/report/run_report.h"
#include "convoy/train/keras_model.h"
#include "test_helpers.h"

namespace convoy::report {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

bool is_png(const fs::path& p) { return read(p).rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

train::History two_epochs() {
  train::History h;
  for (int e = 1; e <= 2; ++e)
    h.epochs.push_back({.epoch = e, .train_loss = 1.0 / e, .train_accuracy = 0.5 + 0.1 * e, .test_loss = 1.2 / e,
                        .test_accuracy = 0.4 + 0.1 * e, .train_seconds = 0.5, .lr = 0.01});
  return h;
}

TEST(RunReport, AKerasModelsFitWritesTheFilesTheCliWrites) {
  const data::TrainTest fashion = data::load_fashion_mnist(data::kFashionMnistDir);
  const data::LabeledImages train_split = data::take(fashion.train, 256);
  const data::LabeledImages test = data::take(fashion.test, 64);
  train::KerasModel model(nn::seed_cnn());
  model.compile({.loss = Loss::nll, .batch_size = 64});
  model.fit(train_split, {.epochs = 2, .validation_data = &test, .verbose = 0});

  testing::TempDir dir;
  RunReport r{.info = {.model = "seed_cnn", .dataset = "Fashion-MNIST", .device = "cpu", .epochs = 2},
              .history = model.history(),
              .classes = data::kFashionMnistClasses,
              .mean = {data::kSeedMean},
              .std = {data::kSeedStd},
              .config_json = R"({"note": "hand-written"})"};
  r.evaluation = train::evaluate_report(model.executable(), test, Loss::nll);
  r.examples = &test;
  const std::vector<std::string> files = write_run_report(dir.path(), r);

  EXPECT_EQ(files, (std::vector<std::string>{"summary.json", "curves.png", "predictions.png", "confusion.png",
                                             "report.html"}));
  for (const std::string& f : files) EXPECT_TRUE(fs::is_regular_file(fs::path(dir.path()) / f)) << f;
  for (const char* png : {"curves.png", "predictions.png", "confusion.png"})
    EXPECT_TRUE(is_png(fs::path(dir.path()) / png)) << png;

  const nlohmann::json s = nlohmann::json::parse(read(fs::path(dir.path()) / "summary.json"));
  EXPECT_EQ(s.at("model"), "seed_cnn");
  EXPECT_EQ(s.at("history").size(), 2u);
  EXPECT_DOUBLE_EQ(s.at("test_accuracy").get<double>(), model.history().epochs.back().test_accuracy);
  EXPECT_EQ(s.at("evaluation").at("examples"), 64);
  EXPECT_EQ(s.at("evaluation").at("per_class").at(9).at("class"), "Ankle boot");
  EXPECT_FALSE(s.contains("compared"));

  const std::string html = read(fs::path(dir.path()) / "report.html");
  EXPECT_NE(html.find("convoy: seed_cnn"), std::string::npos);  // the default title
  EXPECT_NE(html.find("confusion.png"), std::string::npos);
  EXPECT_NE(html.find("Ankle boot"), std::string::npos);  // the per-class table
  EXPECT_NE(html.find("hand-written"), std::string::npos);
}

// A history alone (no evaluation, no images): the curves, the summary and the
// page; compared runs add comparison.png and summary.json's "compared".
TEST(RunReport, AHistoryAloneWritesCurvesSummaryAndPage) {
  testing::TempDir dir;
  const train::History h = two_epochs();
  const std::vector<std::string> files =
      write_run_report(dir.path(), {.info = {.model = "mine"}, .history = h, .title = "my run",
                                    .compared = {{"this run", h}, {"from scratch", h}}});
  EXPECT_EQ(files, (std::vector<std::string>{"summary.json", "curves.png", "comparison.png", "report.html"}));
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "confusion.png"));
  EXPECT_TRUE(is_png(fs::path(dir.path()) / "comparison.png"));
  const nlohmann::json s = nlohmann::json::parse(read(fs::path(dir.path()) / "summary.json"));
  EXPECT_FALSE(s.contains("evaluation"));
  ASSERT_EQ(s.at("compared").size(), 2u);
  EXPECT_EQ(s.at("compared").at(1).at("run"), "from scratch");
  EXPECT_EQ(s.at("compared").at(0).at("best_epoch"), 2);
  EXPECT_NE(read(fs::path(dir.path()) / "report.html").find("my run"), std::string::npos);
}

TEST(RunReport, NoEpochsOrMismatchedExamplesAreOneClearError) {
  testing::TempDir dir;
  EXPECT_NE(testing::error_of([&] { write_run_report(dir.path(), {}); }).find("no epochs"), std::string::npos);
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "summary.json"));

  const data::TrainTest fashion = data::load_fashion_mnist(data::kFashionMnistDir);
  const data::LabeledImages few = data::take(fashion.test, 8);
  train::EvaluationReport ev;
  ev.classes = 10;
  ev.predicted.assign(5, 0);  // scored 5, but 8 images given
  ev.confusion.assign(100, 0);
  RunReport r{.history = two_epochs(), .evaluation = ev, .examples = &few};
  EXPECT_NE(testing::error_of([&] { write_run_report(dir.path(), r); }).find("pass the images it scored"),
            std::string::npos);
}

}  // namespace
}  // namespace convoy::report
