// Hostile input, part two (docs/reliability.md, "Hostile input"): a config
// read from a pipe is read by its content, image decodes share one memory
// budget across threads, and outputs never replace what is not a file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "app/preflight.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/config/run_config.h"
#include "convoy/core/untrusted.h"
#include "convoy/image/codec.h"
#include "convoy/image/decode_budget.h"
#include "convoy/io/atomic_file.h"
#include "convoy/train/checkpoint.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using convoy::testing::error_of;
using convoy::testing::TempDir;
using records::testing::write_bytes;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A real pipe holding `text` (written whole, then closed: it fits the pipe's
// buffer), named as bash names `<(...)`: /dev/fd/N. Closes its read end.
class Piped {
 public:
  explicit Piped(const std::string& text) {
    EXPECT_EQ(::pipe(fds_), 0);
    EXPECT_EQ(::write(fds_[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds_[1]);
  }
  ~Piped() { ::close(fds_[0]); }
  std::string path() const { return "/dev/fd/" + std::to_string(fds_[0]); }

 private:
  int fds_[2] = {-1, -1};
};

TEST(HostileInputFiles, AConfigWithoutItsExtensionIsReadByItsContent) {
  // YAML through a pipe: /dev/fd/N has no extension (it was read as JSON).
  {
    Piped yaml("training:\n  epochs: 3\n  batch_size: 16\n");
    const train::RunConfig c = train::load_run_config(yaml.path());
    EXPECT_EQ(c.epochs, 3);
    EXPECT_EQ(c.batch_size, 16);
  }
  {
    Piped json(" \n\t{\"training\": {\"epochs\": 4}}");
    EXPECT_EQ(train::load_run_config(json.path()).epochs, 4);
  }
  {  // a JSON error names JSON, with the duplicate-key check JSON gets
    Piped json("{\"training\": {\"epochs\": 1, \"epochs\": 2}}");
    const std::string msg = error_of([&] { train::load_run_config(json.path()); });
    EXPECT_NE(msg.find("not valid JSON (the key 'epochs' appears twice"), std::string::npos) << msg;
  }
  TempDir dir;
  write_bytes(dir.file("run-config"), "training:\n  epochs: 5\n");
  EXPECT_EQ(train::load_run_config(dir.file("run-config")).epochs, 5);
  write_bytes(dir.file("bom"), "\xEF\xBB\xBF{\"training\": {\"epochs\": 6}}");
  EXPECT_EQ(train::load_run_config(dir.file("bom")).epochs, 6);
  // An extension still says: a .json of YAML is an error, not a guess.
  write_bytes(dir.file("c.json"), "training:\n  epochs: 5\n");
  EXPECT_NE(error_of([&] { train::load_run_config(dir.file("c.json")); }).find("c.json: not valid JSON"),
            std::string::npos);
}

TEST(HostileInputFiles, APipedConfigsRelativePathsAreTheWorkingFolders) {
  Piped yaml("data:\n  dir: some/data\n");
  // Not /dev/fd/some/data: a pipe's folder anchors nothing.
  EXPECT_EQ(train::load_run_config(yaml.path()).data_dir, "some/data");
  TempDir dir;
  write_bytes(dir.file("c.yaml"), "data:\n  dir: some/data\n");
  EXPECT_EQ(train::load_run_config(dir.file("c.yaml")).data_dir, dir.file("some/data"));
}

TEST(HostileInputFiles, APipeIsReadBoundedAndAnImageIsNoPipe) {
  Piped big(std::string(20000, 'x'));
  const std::string msg = error_of([&] { read_file_bounded(big.path(), 1000, "run config"); });
  EXPECT_NE(msg.find("bytes, more than the 1000 a run config may have"), std::string::npos) << msg;
  Piped jpeg("\xff\xd8\xff");
  const std::string image = error_of([&] { image::read_image_file(jpeg.path()); });
  EXPECT_NE(image.find("not a regular file (a pipe, socket or device); name an image"), std::string::npos) << image;
  TempDir dir;
  write_bytes(dir.file("empty.png"), "");
  write_bytes(dir.file("nuls.png"), std::string(4096, '\0'));
  EXPECT_NE(error_of([&] { image::read_image(dir.file("empty.png")); }).find("empty.png: empty file, not an image"),
            std::string::npos);
  EXPECT_NE(error_of([&] { image::read_image(dir.file("nuls.png")); }).find("nuls.png: not a JPEG or PNG image"),
            std::string::npos);
}

// A gray PNG of width x height whose pixels decode to width * height bytes.
std::string gray_png(int width, int height) {
  image::Image im(width, height, 1);
  return image::encode_png(static_cast<const image::Image&>(im).view());
}

uint64_t decode_cost(int width, int height) {
  return uint64_t(width) * height + uint64_t(height) * sizeof(void*);  // pixels + libpng's row pointers
}

// Budget restored after each test, whatever it asserted.
struct BudgetScope {
  explicit BudgetScope(uint64_t bytes) {
    image::set_decode_budget_bytes(bytes);
    image::reset_decode_budget_peak();
  }
  ~BudgetScope() { image::set_decode_budget_bytes(0); }
};

void decode_in_threads(const std::vector<std::string>& files, int threads, int rounds) {
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        const std::string& f = files[(t + r) % files.size()];
        const image::Image im =
            image::decode_image({reinterpret_cast<const uint8_t*>(f.data()), f.size()}, "x.png");
        if (im.width() == 0) ++failures;
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(HostileInputFiles, ConcurrentDecodesStayWithinOneBudget) {
  const std::string big = gray_png(2000, 1500);  // 3 MB of pixels each
  const uint64_t one = decode_cost(2000, 1500);
  BudgetScope budget(2 * one + one / 2);  // two fit at once, never three
  decode_in_threads({big}, 8, 4);
  const image::DecodeBudgetStats s = image::decode_budget_stats();
  EXPECT_LE(s.peak, image::decode_budget_bytes());
  EXPECT_GE(s.peak, one);
  EXPECT_GT(s.waits, 0u) << "8 threads on a budget of 2 images: some must have waited";
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(HostileInputFiles, AnImageLargerThanTheBudgetRunsAloneAndNothingDeadlocks) {
  const std::string big = gray_png(2000, 1500), small = gray_png(100, 80);
  const uint64_t one = decode_cost(2000, 1500);
  BudgetScope budget(one / 3);  // the big image alone is three times the budget
  decode_in_threads({big, small, small}, 6, 6);
  const image::DecodeBudgetStats s = image::decode_budget_stats();
  EXPECT_EQ(s.peak, one) << "a decode over the budget runs with nothing beside it";
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(HostileInputFiles, TheBudgetIsSizedFromMemory) {
  const uint64_t b = image::decode_budget_bytes();
  EXPECT_GE(b, uint64_t{256} << 20);
  EXPECT_LE(b, uint64_t{2} << 30);
}

// An output's rename replaced whatever held its name: a FIFO, a device node
// (as root), a link. Only a regular file is replaced.
TEST(HostileInputFiles, AnOutputReplacesOnlyARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo.csv").c_str(), 0644), 0);
  fs::create_directories(dir.file("folder.csv"));
  fs::create_symlink("loop.csv", dir.file("loop.csv"));
  write_bytes(dir.file("target.csv"), "mine");
  fs::create_symlink("target.csv", dir.file("link.csv"));
  for (const char* name : {"fifo.csv", "folder.csv", "loop.csv", "link.csv"}) {
    const auto before = fs::symlink_status(dir.file(name)).type();
    const std::string msg = error_of([&] { io::write_file_atomic(dir.file(name), "x"); });
    EXPECT_NE(msg.find(std::string(name) + ": is a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not a file convoy may replace"), std::string::npos) << msg;
    EXPECT_EQ(fs::symlink_status(dir.file(name)).type(), before) << name;
  }
  EXPECT_EQ(read_text(dir.file("target.csv")), "mine");
  io::write_file_atomic(dir.file("target.csv"), "new");  // a regular file is replaced
  EXPECT_EQ(read_text(dir.file("target.csv")), "new");
}

TEST(HostileInputFiles, ACheckpointFolderThatIsNoFolderIsAUserError) {
  TempDir dir;
  fs::create_symlink("b", dir.file("a"));
  fs::create_symlink("a", dir.file("b"));
  write_bytes(dir.file("file"), "x");
  std::ostringstream warn;
  EXPECT_NE(error_of([&] { train::load_latest_checkpoint(dir.file("a"), warn); }).find("a: cannot be read ("),
            std::string::npos);
  EXPECT_NE(error_of([&] { train::load_latest_checkpoint(dir.file("file"), warn); }).find("file: is a file, not a folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { train::load_latest_checkpoint(dir.file("none"), warn); }).find("none: no such folder"),
            std::string::npos);
}

// The root or the data set's own folder as --out: a run's outputs landed
// among the system's files (`--out /` trained and wrote there). Checked before
// anything is written, so this test writes nothing even when the check fails.
TEST(HostileInputFiles, TheOutputFolderIsNeitherTheRootNorTheDataFolder) {
  TempDir dir;
  train::RunConfig c;  // Fashion-MNIST: the data folder is not read by the check
  c.data_dir = dir.path();
  c.out_dir = "/";
  EXPECT_NE(error_of([&] { train::check_before_training(c); }).find("/: is the file system's root"), std::string::npos);
  c.out_dir = "/tmp/../";
  EXPECT_NE(error_of([&] { train::check_before_training(c); }).find("is the file system's root"), std::string::npos);
  c.out_dir = dir.path() + "/.";
  EXPECT_NE(error_of([&] { train::check_before_training(c); }).find(": is the data folder"), std::string::npos);
  c.out_dir = dir.file("run");  // beside the data, in a folder of its own: fine
  EXPECT_EQ(error_of([&] { train::check_before_training(c); }), "(no exception)");
}

}  // namespace
}  // namespace convoy
