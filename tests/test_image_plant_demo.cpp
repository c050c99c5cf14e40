// The Plant Pathology demo generator: the real layout, decodable JPEGs of
// the asked size, one-hot rows, the same bytes for the same seed, and no
// overwriting of folders it did not write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "convoy/core/error.h"
#include "convoy/core/temporary_files.h"
#include "convoy/image/codec.h"
#include "cli/plant_demo.h"
#include "test_helpers.h"
#include "test_image_helpers.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

image::PlantDemoOptions small(const std::string& dir) {
  return {.out_dir = dir, .train = 10, .test = 3, .width = 96, .height = 64, .seed = 5};
}

TEST(PlantDemo, WritesTheKaggleLayout) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("plant");
  const auto summary = image::write_plant_demo(small(dir));
  const auto train = lines_of(dir + "/train.csv"), test = lines_of(dir + "/test.csv");
  ASSERT_EQ(train.size(), 11u);
  EXPECT_EQ(train[0], "image_id,healthy,multiple_diseases,rust,scab");
  std::array<int64_t, 4> counted{};
  for (std::size_t i = 1; i < train.size(); ++i) {
    std::stringstream row(train[i]);
    std::string id, cell;
    std::getline(row, id, ',');
    EXPECT_EQ(id, "Train_" + std::to_string(i - 1));
    int ones = 0, k = 0;
    while (std::getline(row, cell, ',')) {
      ASSERT_TRUE(cell == "0" || cell == "1") << train[i];
      if (cell == "1") ones++, counted[k]++;
      ++k;
    }
    EXPECT_EQ(k, 4);
    EXPECT_EQ(ones, 1) << train[i];
    const image::Image im = image::read_image(dir + "/images/" + id + ".jpg");
    EXPECT_EQ(im.width(), 96);
    EXPECT_EQ(im.height(), 64);
    EXPECT_EQ(im.channels(), 3);
  }
  EXPECT_EQ(counted, summary.train_per_class);
  for (int64_t c : summary.train_per_class) EXPECT_GE(c, 1);  // every class present, even the rare one
  ASSERT_EQ(test.size(), 4u);
  EXPECT_EQ(test[0], "image_id");
  EXPECT_EQ(test[1], "Test_0");
  EXPECT_TRUE(fs::exists(dir + "/images/Test_2.jpg"));
  EXPECT_EQ(lines_of(dir + "/sample_submission.csv")[1], "Test_0,0.25,0.25,0.25,0.25");
  EXPECT_EQ(lines_of(dir + "/test_labels.csv").size(), 4u);
}

TEST(PlantDemo, SameSeedSameBytesAndRerunsReplaceTheDemo) {
  testing::TempDir tmp;
  const std::string a = tmp.file("a"), b = tmp.file("b");
  image::write_plant_demo(small(a));
  image::write_plant_demo(small(b));
  for (const char* f : {"train.csv", "images/Train_4.jpg", "images/Test_1.jpg"})
    EXPECT_EQ(testing::file_bytes(a + "/" + f), testing::file_bytes(b + "/" + f)) << f;
  auto other = small(a);
  other.seed = 6;
  other.train = 4;
  image::write_plant_demo(other);  // a previous demo: replaced whole
  EXPECT_EQ(lines_of(a + "/train.csv").size(), 5u);
  EXPECT_FALSE(fs::exists(a + "/images/Train_4.jpg"));
}

// A regeneration that fails part way (here: train.csv, written last, cannot
// be written) used to leave the new images and CSVs written so far, the guard
// having been made while the previous demo's files were still there.
TEST(PlantDemo, AFailedRegenerationLeavesNoPartialDemo) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("demo");
  image::write_plant_demo(small(dir));
  fs::create_directory(temporary_name(dir + "/train.csv"));  // in the way of train.csv's atomic write
  EXPECT_NE(testing::error_of([&] { image::write_plant_demo(small(dir)); }).find("train.csv"), std::string::npos);
  for (const char* f : {"images", "train.csv", "test.csv", "sample_submission.csv", "test_labels.csv"})
    EXPECT_FALSE(fs::exists(dir + "/" + f)) << f;
  fs::remove(temporary_name(dir + "/train.csv"));
  image::write_plant_demo(small(dir));  // the folder is still the demo's: regenerated
  EXPECT_EQ(lines_of(dir + "/train.csv").size(), 11u);
}

TEST(PlantDemo, RefusesForeignFoldersAndBadSizes) {
  testing::TempDir tmp;
  std::ofstream(tmp.file("precious.txt")) << "real data";
  EXPECT_NE(testing::error_of([&] { image::write_plant_demo(small(tmp.path())); }).find("not empty"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(tmp.file("precious.txt")));
  auto bad = small(tmp.file("x"));
  bad.width = 8;
  EXPECT_NE(testing::error_of([&] { image::write_plant_demo(bad); }).find("--size"), std::string::npos);
  auto no_data = small(tmp.file("y"));
  no_data.fashion_mnist_dir = tmp.file("nowhere");
  EXPECT_NE(testing::error_of([&] { image::write_plant_demo(no_data); }).find("nowhere"), std::string::npos);
}

}  // namespace
}  // namespace convoy
