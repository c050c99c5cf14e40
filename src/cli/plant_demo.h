#pragma once
// A stand-in for the Plant Pathology 2020 (FGVC7) data, which cannot be
// downloaded here, written in exactly its layout:
//
//   DIR/train.csv              image_id,healthy,multiple_diseases,rust,scab (one-hot rows)
//   DIR/test.csv               image_id
//   DIR/sample_submission.csv  image_id + the four columns at 0.25
//   DIR/test_labels.csv        the test images' answers, train.csv's format
//                              (not in the real data: for scoring a submission)
//   DIR/images/Train_<i>.jpg, Test_<i>.jpg
//
// Each image is an RGB JPEG of a realistic size (600 x 400 by default): a
// textured green "leaf" with a Fashion-MNIST garment stamped on it in a
// random colour, size, angle and place. The garment's kind is the class:
//   healthy <- trouser, multiple_diseases <- shirt, rust <- sneaker, scab <- coat
// Shirt and coat look alike and multiple_diseases is rare (5%, as in the
// real data), so, as there, the rare class is the hard one; colours are
// drawn from the same palettes for every class, so only shape tells. A
// small CNN from scratch reaches ~90% test accuracy in 40 epochs at 96x64.
// Class shares follow the real train.csv (28% / 5% / 34% / 33%).
#include <array>
#include <cstdint>
#include <string>

#include "convoy/data/fashion_mnist.h"

namespace convoy::image {

inline constexpr std::array<const char*, 4> kPlantClasses = {"healthy", "multiple_diseases", "rust", "scab"};

struct PlantDemoOptions {
  std::string out_dir;
  int64_t train = 400, test = 100;
  int width = 600, height = 400;
  uint64_t seed = 1;
  int quality = 90;
  std::string fashion_mnist_dir = data::kFashionMnistDir;
};

struct PlantDemoSummary {
  std::array<int64_t, 4> train_per_class{}, test_per_class{};
};

// Writes the data set (same options, same bytes). out_dir must be new, empty
// or a previous demo's folder (which is replaced); anything else is refused
// so real data is never overwritten. Images go to a staging folder renamed
// into place at the end, then the CSVs are written atomically: an
// interrupted run leaves no half data set. Throws UserError naming the
// problem (a bad size or count, an unwritable folder, missing Fashion-MNIST).
PlantDemoSummary write_plant_demo(const PlantDemoOptions& options);

}  // namespace convoy::image
