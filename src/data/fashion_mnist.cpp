#include "convoy/data/fashion_mnist.h"

#include <filesystem>

#include "convoy/core/error.h"
#include "convoy/data/idx.h"

namespace convoy::data {
namespace {

// Accepts the file as named or with .gz, as the dataset is shipped either way.
std::string find_idx(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  for (const std::string& candidate : {name + ".gz", name})
    if (fs::exists(fs::path(dir) / candidate)) return (fs::path(dir) / candidate).string();
  throw UserError(dir + ": no " + name + "[.gz] here; pass --data DIR with the Fashion-MNIST IDX files (Debian's "
                  "dataset-fashion-mnist installs them in " + kFashionMnistDir + ")");
}

LabeledImages load_split(const std::string& dir, const std::string& prefix, float mean, float std) {
  const std::string images_path = find_idx(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx(dir, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx_u8(images_path);
  Tensor labels = read_idx_u8(labels_path);
  require(images.shape().size() == 3, images_path + ": expected [N, H, W] images, got " + to_string(images.shape()));
  require(labels.shape().size() == 1, labels_path + ": expected [N] labels, got " + to_string(labels.shape()));
  for (uint8_t label : labels.data<uint8_t>())
    if (label >= 10)  // not require(): its message would be built for every one of 70,000 labels
      throw UserError(labels_path + ": label " + std::to_string(label) +
                      " is outside Fashion-MNIST's 10 classes; the file is corrupt");
  return from_u8(images, labels, mean, std, images_path + " and " + labels_path);
}

}  // namespace

IdxFiles fashion_mnist_files(const std::string& dir, const std::string& split) {
  require(split == "train" || split == "t10k",
          "Fashion-MNIST split '" + split + "' does not exist; use \"train\" or \"t10k\"");
  require(std::filesystem::is_directory(dir),
          dir + ": no such data directory; pass the folder with the Fashion-MNIST IDX files or run "
                "'apt-get install dataset-fashion-mnist'");
  return {find_idx(dir, split + "-images-idx3-ubyte"), find_idx(dir, split + "-labels-idx1-ubyte")};
}

TrainTest load_fashion_mnist(const std::string& dir, float mean, float std) {
  require(std::filesystem::is_directory(dir),
          dir + ": no such data directory; pass --data DIR with the Fashion-MNIST IDX files or run "
                "'apt-get install dataset-fashion-mnist'");
  return {load_split(dir, "train", mean, std), load_split(dir, "t10k", mean, std)};
}

}  // namespace convoy::data
