#include <cairo.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "convoy/report/plots.h"
#include "report/plot_ticks.h"
#include "test_helpers.h"

namespace convoy::report {
namespace {

std::pair<int, int> png_size(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  EXPECT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS) << path;
  std::pair<int, int> wh{cairo_image_surface_get_width(s), cairo_image_surface_get_height(s)};
  cairo_surface_destroy(s);
  return wh;
}

// Whether every pixel of the columns [x0, x1) in rows [y0, y1) is white.
bool white(const std::string& path, int x0, int x1, int y0, int y1) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  bool all = true;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      all = all && (reinterpret_cast<const uint32_t*>(data + y * stride)[x] & 0xffffff) == 0xffffff;
  cairo_surface_destroy(s);
  return all;
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

}  // namespace convoy::report

#include "convoy/io/tensorboard.h"

namespace convoy::report {

TEST(Plots, TicksFallOnRoundValuesAndCoverTheData) {
  const Ticks t = nice_ticks(0.656, 0.739);  // the odd ticks a user met
  EXPECT_DOUBLE_EQ(t.step, 0.02);
  EXPECT_NEAR(t.values.front(), 0.64, 1e-12);
  EXPECT_NEAR(t.values.back(), 0.74, 1e-12);
  EXPECT_EQ(t.label(t.values.front()), "0.64");
  const Ticks quarter = nice_ticks(0, 12.5);
  EXPECT_DOUBLE_EQ(quarter.step, 2.5);
  EXPECT_EQ(quarter.label(7.5), "7.5");  // as many decimals as the step needs
  EXPECT_EQ(quarter.label(10), "10.0");
  for (auto [lo, hi] : {std::pair{0.0, 1.0}, {0.3, 0.31}, {12.0, 97.0}, {-3.0, 4.5}, {0.0012, 0.0093}, {5.0, 5.0},
                        {72.1, 88.9}, {1e-5, 3e5}}) {
    const Ticks k = nice_ticks(lo, hi, 6);
    ASSERT_GE(k.values.size(), 2u) << lo << " " << hi;
    EXPECT_LE(k.values.size(), 7u) << lo << " " << hi;
    EXPECT_LE(k.values.front(), lo);
    EXPECT_GE(k.values.back(), hi);
    const double mantissa = k.step / std::pow(10.0, std::floor(std::log10(k.step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 2.5) < 1e-9 ||
                std::abs(mantissa - 5) < 1e-9)
        << "step " << k.step;
    for (double v : k.values) EXPECT_NEAR(v / k.step, std::round(v / k.step), 1e-6) << v;
  }
}

TEST(Plots, ConfusionTitleAndClassNamesFitTheImage) {
  testing::TempDir dir;
  const std::vector<int64_t> m = {5, 1, 2, 7};
  // Two short classes: the image is as wide as its title, which is whole (no ink at the edges).
  write_confusion_png(dir.file("short.png"), m, {"a", "b"});
  const auto [w_short, h_short] = png_size(dir.file("short.png"));
  EXPECT_TRUE(white(dir.file("short.png"), 0, 3, 0, 34));
  EXPECT_TRUE(white(dir.file("short.png"), w_short - 3, w_short, 0, 34));
  EXPECT_FALSE(white(dir.file("short.png"), 0, w_short, 0, 34));  // the title is there
  // Longer names: margins grow to hold them.
  write_confusion_png(dir.file("long.png"), m, {"multiple_diseases", "healthy"});
  const auto [w_long, h_long] = png_size(dir.file("long.png"));
  EXPECT_GE(w_long, w_short);
  EXPECT_GT(h_long, h_short);
  EXPECT_TRUE(white(dir.file("long.png"), 0, 2, 0, h_long));  // nothing runs off the left edge
  // Absurd names are ellipsized: the image stays a sensible size.
  write_confusion_png(dir.file("absurd.png"), m, {std::string(300, 'x'), "\u00e9t\u00e9 " + std::string(200, 'y')});
  const auto [w_absurd, h_absurd] = png_size(dir.file("absurd.png"));
  EXPECT_LT(w_absurd, 800);
  EXPECT_LT(h_absurd, 500);
  EXPECT_TRUE(white(dir.file("absurd.png"), 0, 2, 0, h_absurd));
}

TEST(TensorBoard, Crc32cKnownValueAndFramedRecords) {
  EXPECT_EQ(io::crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  testing::TempDir dir;
  std::string path;
  {
    io::EventWriter w(dir.path());
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

}  // namespace convoy::report
