#pragma once
// The default dataset: Fashion-MNIST as IDX files (Debian's
// dataset-fashion-mnist installs them in kFashionMnistDir).
#include <string>
#include <vector>

#include "convoy/data/labeled_images.h"

namespace convoy::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// The seed's normalisation (transforms.Normalize((0.1307,), (0.3081,))).
inline constexpr float kSeedMean = 0.1307f;
inline constexpr float kSeedStd = 0.3081f;
// One image: [channels, height, width].
inline const Shape kFashionMnistShape{1, 28, 28};
// The class names in label order.
inline const std::vector<std::string> kFashionMnistClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct TrainTest {
  LabeledImages train, test;
};

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`, scales
// pixels to [0, 1] and normalises with (x - mean) / std. Throws UserError
// naming the missing or bad file.
TrainTest load_fashion_mnist(const std::string& dir, float mean = kSeedMean, float std = kSeedStd);

// The IDX files of one split ("train" or "t10k") in `dir`, compressed or not.
// Throws UserError naming what is missing.
struct IdxFiles {
  std::string images, labels;
};
IdxFiles fashion_mnist_files(const std::string& dir, const std::string& split);

}  // namespace convoy::data
