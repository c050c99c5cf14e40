#include "plant_demo.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <unistd.h>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/rng.h"
#include "convoy/data/dataset.h"
#include "convoy/data/idx.h"
#include "convoy/image/codec.h"
#include "convoy/image/geometry.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/output_folder.h"

namespace convoy::image {
namespace {

namespace fs = std::filesystem;

// Fashion-MNIST label of each plant class (see the header): trouser, shirt, sneaker, coat.
constexpr std::array<int, 4> kGarment = {1, 6, 7, 4};
// Shares of the real train.csv: 516, 91, 622, 592 of 1821.
constexpr std::array<double, 4> kShare = {516.0 / 1821, 91.0 / 1821, 622.0 / 1821, 592.0 / 1821};
constexpr const char* kMarker = ".convoy-demo-data";

struct Garments {
  Tensor images;                                // u8 [N, 28, 28]
  std::array<std::vector<int64_t>, 4> by_class;  // rows of each plant class
};

Garments load_garments(const std::string& dir, const std::string& split) {
  const data::IdxFiles files = data::fashion_mnist_files(dir, split);
  Garments g{data::read_idx_u8(files.images), {}};
  const Tensor labels = data::read_idx_u8(files.labels);
  const auto l = labels.data<uint8_t>();
  for (std::size_t i = 0; i < l.size(); ++i)
    for (int c = 0; c < 4; ++c)
      if (l[i] == kGarment[c]) g.by_class[c].push_back(static_cast<int64_t>(i));
  return g;
}

// Class of each of n images: the real shares by largest remainder (every
// class present once n >= 4), in a seeded random order.
std::vector<int> class_sequence(int64_t n, Rng& rng) {
  std::array<int64_t, 4> count{};
  std::array<double, 4> rest{};
  int64_t given = 0;
  for (int c = 0; c < 4; ++c) {
    count[c] = static_cast<int64_t>(std::floor(n * kShare[c]));
    rest[c] = n * kShare[c] - count[c];
    given += count[c];
  }
  while (given < n) {
    const int c = static_cast<int>(std::max_element(rest.begin(), rest.end()) - rest.begin());
    ++count[c], ++given, rest[c] = -1;
  }
  for (int c = 0; c < 4 && n >= 4; ++c)
    if (count[c] == 0) {
      --count[std::max_element(count.begin(), count.end()) - count.begin()];
      count[c] = 1;
    }
  std::vector<int64_t> order;
  for (int c = 0; c < 4; ++c) order.insert(order.end(), count[c], c);
  shuffle(order, rng);
  return {order.begin(), order.end()};
}

uint8_t clamp_byte(double v) { return static_cast<uint8_t>(std::clamp(v + 0.5, 0.0, 255.0)); }

// A textured leaf with the garment stamped on it.
Image render(const Garments& g, int plant_class, int width, int height, Rng& rng) {
  // Leaf: a green base, smooth blotches (coarse noise, enlarged), a vein.
  const double base[3] = {rng.uniform(40, 95), rng.uniform(105, 165), rng.uniform(25, 70)};
  Image coarse(std::max(2, width / 40), std::max(2, height / 40), 3);
  for (std::size_t i = 0; i < coarse.bytes(); i += 3) {
    const double shade = rng.uniform(-18, 18);
    for (int c = 0; c < 3; ++c) coarse.data()[i + c] = clamp_byte(base[c] + shade + rng.uniform(-6, 6));
  }
  Image leaf = resize(coarse, width, height, ResizeMethod::bilinear);
  const double vein_angle = rng.uniform(-0.6f, 0.6f), vein_offset = rng.uniform(-0.2f, 0.2f) * height;

  // Garment: enlarged, turned, placed; its ink is a random "disease" colour.
  const int64_t row = g.by_class[plant_class][rng.below(g.by_class[plant_class].size())];
  const Image garment_small = [&] {
    Image im(28, 28, 1);
    std::copy_n(g.images.data<uint8_t>().data() + row * 784, 784, im.data());
    return im;
  }();
  const int side = std::max(8, static_cast<int>(rng.uniform(0.55f, 0.9f) * std::min(width, height)));
  const Image big = resize(garment_small, side, side, ResizeMethod::bilinear);
  Image garment(width, height, 1);
  const double gx = rng.uniform(0, static_cast<float>(width - side)), gy = rng.uniform(0, static_cast<float>(height - side));
  const Affine place = Affine::translation(gx, gy);
  const Affine turn = Affine::rotation(rng.uniform(-0.5f, 0.5f), side, side);
  warp_affine(big, garment.view(), turn.after(place), FillMode::constant, 0);
  static constexpr double kInks[4][3] = {{150, 80, 25}, {225, 200, 70}, {60, 40, 30}, {200, 140, 90}};
  const double* ink = kInks[rng.below(4)];
  const double strength = rng.uniform(0.75f, 1.0f);

  Image out(width, height, 3);
  const double ca = std::cos(vein_angle), sa = std::sin(vein_angle);
  for (int y = 0; y < height; ++y) {
    const uint8_t* lp = leaf.row(y);
    const uint8_t* gp = garment.row(y);
    uint8_t* op = out.row(y);
    for (int x = 0; x < width; ++x) {
      const double dist = std::abs(-sa * (x - width / 2.0) + ca * (y - height / 2.0) - vein_offset);
      const double vein = dist < 3 ? 30 * (1 - dist / 3) : 0;
      const double a = strength * gp[x] / 255.0;
      const double noise = rng.uniform(-7, 7);
      for (int c = 0; c < 3; ++c) op[3 * x + c] = clamp_byte((1 - a) * (lp[3 * x + c] + vein) + a * ink[c] + noise);
    }
  }
  return out;
}

void write_plain(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush())
    throw UserError(path.string() + ": cannot write (disk full or not writable?); pass a writable --out DIR");
}

// Refuses a folder holding anything but a previous demo; clears a previous demo.
// The files a demo folder holds besides the marker.
constexpr const char* kDemoFiles[] = {"images", "train.csv", "test.csv", "sample_submission.csv", "test_labels.csv"};

// A new or empty --out, or a previous demo's folder, whose files are removed.
void clear_previous_demo(const fs::path& dir) {
  if (path_kind(dir.string()) != "missing") require_folder(dir.string(), "", "pass a new or empty --out DIR");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    require(fs::exists(dir / kMarker),
            dir.string() + ": folder is not empty and holds no convoy demo data; pass a new or empty --out DIR "
                           "(convoy never overwrites other data)");
    for (const char* name : kDemoFiles) fs::remove_all(dir / name, ec);
  }
}

std::string one_hot_row(const std::string& id, int c) {
  std::string row = id;
  for (int k = 0; k < 4; ++k) row += k == c ? ",1" : ",0";
  return row + "\n";
}

}  // namespace

PlantDemoSummary write_plant_demo(const PlantDemoOptions& o) {
  require(!o.out_dir.empty(), "demo-data plant: give an output folder (--out DIR)");
  require(o.train >= 1 && o.test >= 0 && o.train <= 1000000 && o.test <= 1000000,
          "demo-data plant: --train must be in [1, 1000000] and --test in [0, 1000000]");
  require(o.width >= 32 && o.height >= 32 && o.width <= 8192 && o.height <= 8192,
          "demo-data plant: --size must be between 32x32 and 8192x8192, got " + std::to_string(o.width) + "x" +
              std::to_string(o.height));
  require(o.quality >= 1 && o.quality <= 100, "demo-data plant: quality must be in [1, 100]");
  const Garments train_src = load_garments(o.fashion_mnist_dir, "train");
  const Garments test_src = load_garments(o.fashion_mnist_dir, "t10k");  // no garment in both splits

  const fs::path dir(o.out_dir);
  clear_previous_demo(dir);
  // A failure (a full disk, an unwritable folder) takes back what this call
  // added, the marker included, and the folder when it made it. Made after a
  // previous demo's files are gone, so the new ones count as added: a failed
  // regeneration leaves no partial demo (a previous demo's marker stays).
  std::vector<std::string> outputs(std::begin(kDemoFiles), std::end(kDemoFiles));
  outputs.push_back(kMarker);
  io::FolderGuard folder(dir.string(), {}, outputs);
  io::ensure_writable_dir(dir.string());
  io::write_file_atomic((dir / kMarker).string(), "written by convoy demo-data plant\n");
  const fs::path staging = dir / (".images.partial-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  require(!ec, staging.string() + ": cannot create (" + ec.message() + "); pass a writable --out DIR");

  PlantDemoSummary summary;
  std::string train_csv = "image_id,healthy,multiple_diseases,rust,scab\n", test_csv = "image_id\n";
  std::string sample = train_csv, answers = train_csv;
  try {
    for (int split = 0; split < 2; ++split) {
      const bool is_train = split == 0;
      const int64_t n = is_train ? o.train : o.test;
      Rng order_rng(data::element_seed(o.seed, split, -1));
      const std::vector<int> classes = class_sequence(n, order_rng);
      for (int64_t i = 0; i < n; ++i) {
        Rng rng(data::element_seed(o.seed, split, i));
        const std::string id = (is_train ? "Train_" : "Test_") + std::to_string(i);
        const int c = classes[i];
        const Image img = render(is_train ? train_src : test_src, c, o.width, o.height, rng);
        write_plain(staging / (id + ".jpg"), encode_jpeg(img, o.quality));
        if (is_train) {
          ++summary.train_per_class[c];
          train_csv += one_hot_row(id, c);
        } else {
          ++summary.test_per_class[c];
          test_csv += id + "\n";
          sample += id + ",0.25,0.25,0.25,0.25\n";
          answers += one_hot_row(id, c);
        }
      }
    }
    fs::rename(staging, dir / "images", ec);
    require(!ec, (dir / "images").string() + ": cannot move the images into place (" + ec.message() + ")");
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  io::write_file_atomic((dir / "test_labels.csv").string(), answers);
  io::write_file_atomic((dir / "sample_submission.csv").string(), sample);
  io::write_file_atomic((dir / "test.csv").string(), test_csv);
  io::write_file_atomic((dir / "train.csv").string(), train_csv);
  return summary;
}

}  // namespace convoy::image
