#include <cairo.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "convoy/io/plots.h"
#include "test_helpers.h"

namespace convoy::io {
namespace {

std::pair<int, int> png_size(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  EXPECT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS) << path;
  std::pair<int, int> wh{cairo_image_surface_get_width(s), cairo_image_surface_get_height(s)};
  cairo_surface_destroy(s);
  return wh;
}

train::History two_epochs() {
  train::History h;
  h.epochs.push_back({.epoch = 1, .train_loss = 0.7, .train_accuracy = 0.76, .test_loss = 0.46, .test_accuracy = 0.83});
  h.epochs.push_back({.epoch = 2, .train_loss = 0.4, .train_accuracy = 0.86, .test_loss = 0.38, .test_accuracy = 0.86});
  return h;
}

}  // namespace

TEST(Plots, WritesReadablePngsAndAReportThatLinksThem) {
  testing::TempDir dir;
  write_curves_png(dir.file("curves.png"), two_epochs());
  EXPECT_EQ(png_size(dir.file("curves.png")), std::make_pair(1100, 420));

  std::vector<float> images(30 * 28 * 28, 0.5f);
  std::vector<int32_t> labels(30, 1), predicted(30, 1);
  predicted[3] = 2;
  write_predictions_png(dir.file("predictions.png"),
                        {.images = images.data(), .count = 30, .height = 28, .width = 28, .labels = labels.data(),
                         .predicted = predicted.data(), .class_names = {"a", "b", "c"}});
  EXPECT_EQ(png_size(dir.file("predictions.png")), std::make_pair(5 * 190, 5 * 190 + 40));

  write_confusion_png(dir.file("confusion.png"), {5, 1, 0, 2}, {"cat", "dog"});
  EXPECT_GT(png_size(dir.file("confusion.png")).first, 100);

  write_report_html(dir.file("report.html"), {.title = "t <x>", .device = "cpu", .config_json = "{}", .threads = 2,
                                              .images = {"curves.png"}},
                    two_epochs());
  std::stringstream html;
  html << std::ifstream(dir.file("report.html")).rdbuf();
  EXPECT_NE(html.str().find("<img src=\"curves.png\""), std::string::npos);
  EXPECT_NE(html.str().find("t &lt;x&gt;"), std::string::npos);
  EXPECT_NE(html.str().find("86.00%"), std::string::npos);
}

}  // namespace convoy::io

#include "convoy/io/tensorboard.h"

namespace convoy::io {

TEST(TensorBoard, Crc32cKnownValueAndFramedRecords) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  testing::TempDir dir;
  std::string path;
  {
    EventWriter w(dir.path());
    w.scalar("epoch_loss", 0.5f, 1);
    w.flush();
    path = w.path();
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Two records (file_version, then the scalar), each: u64 length, masked CRC, payload, masked CRC.
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  ASSERT_GT(bytes.size(), 16 + len);
  uint64_t len2 = 0;
  std::memcpy(&len2, bytes.data() + 16 + len, 8);
  EXPECT_EQ(bytes.size(), 16 + len + 16 + len2);
  EXPECT_NE(bytes.find("brain.Event:2"), std::string::npos);
  EXPECT_NE(bytes.find("epoch_loss"), std::string::npos);
}

}  // namespace convoy::io
