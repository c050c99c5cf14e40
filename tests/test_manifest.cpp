// Image manifests: the Plant Pathology CSV layout, a label-column CSV, class
// folders; every bad row named; the stratified split.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "convoy/records/manifest.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::records {
namespace {

using convoy::testing::error_of;
using convoy::testing::TempDir;
using testing::write_bytes;

const std::string kHeader = "image_id,healthy,multiple_diseases,rust,scab\n";

// <dir>/train.csv with `rows` under the Plant Pathology header, and an image
// file for each id in `images`.
std::string plant_csv(const TempDir& dir, const std::string& rows, const std::vector<std::string>& images,
                      const std::string& header = kHeader) {
  std::filesystem::create_directories(dir.file("images"));
  for (const std::string& id : images) write_bytes(dir.file("images/" + id + ".jpg"), "jpeg of " + id);
  write_bytes(dir.file("train.csv"), header + rows);
  return dir.file("train.csv");
}

CsvManifestOptions quiet(std::vector<std::string>* log) {
  CsvManifestOptions o;
  o.log = [log](const std::string& line) { log->push_back(line); };
  return o;
}

}  // namespace

TEST(Manifest, PlantPathologyTrainCsvGivesOneHotLabels) {
  TempDir dir;
  const std::string csv = plant_csv(dir, "Train_0,0,0,0,1\r\nTrain_1,0,1,0,0\r\nTrain_2,1,0,0,0\r\n",
                                    {"Train_0", "Train_1", "Train_2"});
  const Manifest m = read_csv_manifest(csv);
  EXPECT_EQ(m.classes, (std::vector<std::string>{"healthy", "multiple_diseases", "rust", "scab"}));
  EXPECT_EQ(m.label_kind, LabelKind::one_hot);
  ASSERT_EQ(m.entries.size(), 3u);
  EXPECT_EQ(m.entries[1].id, "Train_1");
  EXPECT_EQ(m.entries[1].one_hot, (std::vector<float>{0, 1, 0, 0}));
  EXPECT_EQ(m.entries[1].path, dir.file("images/Train_1.jpg"));
  EXPECT_EQ(m.entries[1].where, csv + " line 3");

  int i = 0;
  for (data::Example& e : manifest_dataset(m).epoch(0)) {
    const Tensor& bytes = e.tensor("image_bytes");
    EXPECT_EQ(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()), "jpeg of Train_" + std::to_string(i));
    EXPECT_EQ(e.tensor("label").shape(), Shape{4});
    EXPECT_EQ(e.text("id"), "Train_" + std::to_string(i));
    EXPECT_EQ(e.text("file"), dir.file("images/Train_" + std::to_string(i) + ".jpg"));
    ++i;
  }
  EXPECT_EQ(i, 3);
}

TEST(Manifest, TestCsvWithOnlyIdsIsUnlabeled) {
  TempDir dir;
  const std::string csv = plant_csv(dir, "Test_0\nTest_1\n", {"Test_0", "Test_1"}, "image_id\n");
  const Manifest m = read_csv_manifest(csv);
  EXPECT_EQ(m.label_kind, LabelKind::none);
  EXPECT_TRUE(m.classes.empty());
  for (data::Example& e : manifest_dataset(m, {.read_bytes = false}).epoch(0)) {
    EXPECT_FALSE(e.has("label"));
    EXPECT_FALSE(e.has("image_bytes"));
    EXPECT_TRUE(e.has("file"));
  }
}

TEST(Manifest, LabelColumnOfClassNames) {
  TempDir dir;
  const std::string csv = plant_csv(dir, "a,rust\nb,healthy\nc,rust\n", {"a", "b", "c"}, "file,disease\n");
  CsvManifestOptions o;
  o.id_column = "file";
  o.label_column = "disease";
  Manifest m = read_csv_manifest(csv, o);
  EXPECT_EQ(m.classes, (std::vector<std::string>{"healthy", "rust"}));  // sorted
  EXPECT_EQ(m.label_kind, LabelKind::index);
  EXPECT_EQ(m.entries[0].label, 1);
  EXPECT_EQ(m.entries[1].label, 0);
  o.classes = {"rust", "scab", "healthy"};  // an explicit order
  m = read_csv_manifest(csv, o);
  EXPECT_EQ(m.entries[0].label, 0);
  EXPECT_EQ(m.entries[1].label, 2);
  for (data::Example& e : manifest_dataset(m).epoch(0)) EXPECT_EQ(e.tensor("label").shape(), Shape{});
  o.classes = {"healthy", "scab"};
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv, o); }),
            csv + ": line 2: unknown class 'rust' in column 'disease'; add it to the classes given (data.classes; "
                  "shards: --classes) or fix the CSV to use one of: healthy, scab (or set on_bad_example: skip)");
}

// The image workflow trains one class per image: a row setting two was found
// only when its image was decoded mid-pipeline ("map: element 0 ..."); shards
// keep such rows (multi-label).
TEST(Manifest, ARowSettingTwoClassesIsABadRowWhereOneClassPerRowIsAsked) {
  TempDir dir;
  const std::string csv = plant_csv(dir, "a,1,0,0,0\nb,0,1,1,0\n", {"a", "b"});
  EXPECT_EQ(read_csv_manifest(csv).entries.size(), 2u);
  CsvManifestOptions o;
  o.one_class_per_row = true;
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv, o); }),
            csv + ": line 3: 2 classes set (multiple_diseases, rust); the image workflow trains one class per image: "
                  "keep one 1 in the row (or set on_bad_example: skip)");
  std::vector<std::string> log;
  o.log = [&](const std::string& line) { log.push_back(line); };
  o.on_bad_example = data::OnBadExample::skip;
  EXPECT_EQ(read_csv_manifest(csv, o).entries.size(), 1u);
  EXPECT_EQ(log.size(), 1u);
}

// Class names a folder, a CSV column and a report can hold, checked where
// they are read, each error saying where the name came from.
TEST(Manifest, ClassNamesThatAreNoNamesAreRefusedWithWhereTheyCameFrom) {
  TempDir dir;
  const std::string csv = plant_csv(dir, "a,1,0\n", {"a"}, "image_id,ok,\n");
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv); }),
            csv + ", its header: class name '' is empty; rename it in the CSV");
  write_bytes(csv, "image_id,ok,\"\"\"\"\na,1,0\n");
  EXPECT_NE(error_of([&] { read_csv_manifest(csv); }).find("class name '\"' is only quotes"), std::string::npos);
  write_bytes(csv, "image_id,kind\na,x\x1b[31m\n");
  CsvManifestOptions o;
  o.label_column = "kind";
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv, o); }),
            csv + ": line 2: class name 'x\\x1b[31m' in column 'kind' holds control bytes (a tab, newline or escape); "
                  "give the row a class name (or set on_bad_example: skip)");
  write_bytes(csv, "image_id,ok,caf\xe9\na,1,0\n");  // a header saved in cp1252: JSON files cannot hold it
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv); }),
            csv + ", its header: class name 'caf\\xe9' is not UTF-8 text (saved in another encoding, such as cp1252 "
                  "or Latin-1?); rename it in the CSV");
  write_bytes(csv, "image_id,kind\na,x\x1b[31m\n");
  o.classes = {"ok", ".."};
  EXPECT_NE(error_of([&] { read_csv_manifest(csv, o); }).find("(the classes given: data.classes or shards --classes): "
                                                               "class name '..' is a folder's own or parent link"),
            std::string::npos);
  TempDir folders;
  for (const char* f : {"ok/a.jpg", "bell\a/b.jpg"}) {
    std::filesystem::create_directories(std::filesystem::path(folders.file(f)).parent_path());
    write_bytes(folders.file(f), f);
  }
  EXPECT_EQ(error_of([&] { read_folder_manifest(folders.path()); }),
            folders.path() + ", a class folder: class name 'bell\\x07' holds control bytes (a tab, newline or escape); "
                             "rename the folder");
}

// In label-column mode one row's bad label refused the whole file even with
// on_bad_example: skip; it is now a bad row like the others.
TEST(Manifest, ABadLabelValueIsABadRow) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("images"));
  for (const char* id : {"a", "b", "c", "d", "e"}) write_bytes(dir.file(std::string("images/") + id + ".jpg"), id);
  const std::string csv = dir.file("labels.csv");
  write_bytes(csv, "image_id,kind\na,cat\nb,.\nc,\"\"\"\"\"\"\nd,caf\xe9\ne,dog\n");
  CsvManifestOptions o;
  o.label_column = "kind";
  o.on_bad_example = data::OnBadExample::skip;
  std::vector<std::string> log;
  o.log = [&](const std::string& line) { log.push_back(line); };
  const Manifest m = read_csv_manifest(csv, o);
  EXPECT_EQ(m.classes, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.skipped.size(), 3u);
}

TEST(Manifest, EachBadRowIsOneErrorNamingFileAndLine) {
  TempDir dir;
  const std::vector<std::string> images = {"ok", "x"};
  auto error_for = [&](const std::string& row) {
    return error_of([&] { read_csv_manifest(plant_csv(dir, "ok,1,0,0,0\n" + row, images)); });
  };
  const std::string csv = dir.file("train.csv");
  EXPECT_EQ(error_for("x,1,0,0\n"), csv + ": line 3: 4 fields but the header has 5 columns; fix the row (quote "
                                          "fields that contain commas) (or set on_bad_example: skip)");
  EXPECT_EQ(error_for("x,0,0,0,0\n"), csv + ": line 3: no class set (every one of healthy, multiple_diseases, rust, "
                                            "scab is 0); set a 1 in the row's class (or set on_bad_example: skip)");
  EXPECT_EQ(error_for("x,0,2,0,0\n").find(csv + ": line 3: column 'multiple_diseases' holds '2', not 0 or 1"), 0u);
  EXPECT_EQ(error_for("gone,1,0,0,0\n").find(csv + ": line 3: image file " + dir.file("images/gone.jpg") + " is missing"),
            0u);
  EXPECT_EQ(error_for("ok,0,1,0,0\n").find(csv + ": line 3: image_id 'ok' appears again (first on line 2)"), 0u);
  EXPECT_EQ(error_for(",1,0,0,0\n").find(csv + ": line 3: empty image_id"), 0u);
  write_bytes(csv, kHeader);
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv); }).find(csv + ": the CSV has a header but no rows"), 0u);
  write_bytes(csv, "id,healthy\nok,1\n");
  EXPECT_EQ(error_of([&] { read_csv_manifest(csv); }).find(csv + ": no column 'image_id'"), 0u);
}

TEST(Manifest, SkipLeavesBadRowsOutAndNamesThemInOneLine) {
  TempDir dir;
  const std::string csv = plant_csv(dir,
                                    "a,1,0,0,0\n"
                                    "b,0,0,0,0\n"      // no class
                                    "c,0,0,1\n"        // wrong width
                                    "gone,0,0,1,0\n"   // missing image
                                    "d,0,0,1.0,0\n",   // pandas-style float: fine
                                    {"a", "b", "c", "d"});
  std::vector<std::string> log;
  CsvManifestOptions o = quiet(&log);
  o.on_bad_example = data::OnBadExample::skip;
  const Manifest m = read_csv_manifest(csv, o);
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[0].id, "a");
  EXPECT_EQ(m.entries[1].id, "d");
  EXPECT_EQ(m.skipped.size(), 3u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind(csv + ": skipped 3 bad rows: line 3: no class set", 0), 0u) << log[0];
  EXPECT_NE(log[0].find("line 4: 4 fields"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("line 5: image file"), std::string::npos) << log[0];
}

TEST(Manifest, UnreadableImageAtReadTimeFailsOrIsSkipped) {
  TempDir dir;
  const Manifest m = read_csv_manifest(plant_csv(dir, "a,1,0,0,0\nb,0,1,0,0\n", {"a", "b"}));
  std::filesystem::remove(dir.file("images/a.jpg"));
  const std::string msg = error_of([&] { for (auto& e : manifest_dataset(m).epoch(0)) (void)e; });
  EXPECT_EQ(msg.find(dir.file("images/a.jpg") + " (" + dir.file("train.csv") + " line 2): cannot open the image"), 0u)
      << msg;
  std::vector<std::string> log;
  ManifestDatasetOptions o{.on_bad_example = data::OnBadExample::skip};
  o.log = [&](const std::string& line) { log.push_back(line); };
  int n = 0;
  for (auto& e : manifest_dataset(m, o).epoch(0)) n += e.text("id") == "b";
  EXPECT_EQ(n, 1);
  EXPECT_EQ(o.skipped->count_in_epoch(0), 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("skipped 1 bad image in epoch 0: " + dir.file("images/a.jpg")), std::string::npos) << log[0];
}

TEST(Manifest, ClassFoldersAreSortedAsKerasDoes) {
  TempDir dir;
  for (const char* f : {"tulip/b.JPG", "tulip/a.png", "tulip/notes.txt", "daisy/z.jpeg", "daisy/sub/y.jpg",
                        "rose/c.jpg"}) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(f)).parent_path());
    write_bytes(dir.file(f), f);
  }
  // Hidden entries are neither classes nor images (a Mac's ._x.jpg is no JPEG).
  for (const char* f : {".ipynb_checkpoints/a.jpg", "__MACOSX/rose/._c.jpg", "rose/._c.jpg", "tulip/.cache/d.jpg"}) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(f)).parent_path());
    write_bytes(dir.file(f), f);
  }
  std::filesystem::create_directories(dir.file("empty_class"));
  // Unlike Keras, an empty class folder is no class (its output would never be trained): an error, or skipped.
  EXPECT_NE(error_of([&] { read_folder_manifest(dir.path()); }).find("empty_class/: a class folder with no images"),
            std::string::npos);
  const Manifest m = read_folder_manifest(dir.path(), {.on_bad_example = data::OnBadExample::skip});
  EXPECT_EQ(m.classes, (std::vector<std::string>{"daisy", "rose", "tulip"}));
  EXPECT_EQ(m.skipped.size(), 1u);
  std::vector<std::pair<std::string, int32_t>> got;
  for (const ManifestEntry& e : m.entries) got.emplace_back(e.id, e.label);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int32_t>>{
                     {"daisy/sub/y.jpg", 0}, {"daisy/z.jpeg", 0}, {"rose/c.jpg", 1}, {"tulip/a.png", 2}, {"tulip/b.JPG", 2}}));
  // Named by data.classes, an empty class stays (on purpose: a label order to keep).
  EXPECT_EQ(read_folder_manifest(dir.path(), {.classes = {"empty_class", "rose"}}).classes.size(), 2u);
  const Manifest two = read_folder_manifest(dir.path(), {.classes = {"tulip", "rose"}});
  EXPECT_EQ(two.entries.size(), 3u);
  EXPECT_EQ(two.entries[0].label, 0);
  EXPECT_NE(error_of([&] { read_folder_manifest(dir.path(), {.classes = {"lily"}}); }).find("lily"), std::string::npos);
  EXPECT_NE(error_of([&] { read_folder_manifest(dir.file("nope")); }).find("no such folder"), std::string::npos);
  EXPECT_NE(error_of([&] { read_folder_manifest(dir.file("empty_class")); }).find("no class subfolders"),
            std::string::npos);
}

TEST(Manifest, StratifiedSplitKeepsClassProportionsAndIsSeeded) {
  Manifest m;
  m.classes = {"a", "b", "c"};
  m.label_kind = LabelKind::index;
  const std::map<int32_t, int> counts = {{0, 50}, {1, 30}, {2, 7}};
  for (const auto& [label, n] : counts)
    for (int i = 0; i < n; ++i) m.entries.push_back({.id = std::to_string(label) + "_" + std::to_string(i), .label = label});
  const ManifestSplit s = stratified_split(m, 0.2, 1);
  std::map<int32_t, int> validation_counts;
  std::set<std::string> ids;
  for (const ManifestEntry& e : s.validation.entries) ++validation_counts[e.label], ids.insert(e.id);
  for (const ManifestEntry& e : s.train.entries) ids.insert(e.id);
  EXPECT_EQ(ids.size(), m.entries.size());  // disjoint and covering
  EXPECT_EQ(s.train.entries.size() + s.validation.entries.size(), m.entries.size());
  EXPECT_EQ(validation_counts, (std::map<int32_t, int>{{0, 10}, {1, 6}, {2, 1}}));  // round(0.2 × n)
  EXPECT_EQ(s.validation.classes, m.classes);
  // Same seed, same split; another seed, another one.
  auto ids_of = [](const Manifest& half) {
    std::vector<std::string> out;
    for (const ManifestEntry& e : half.entries) out.push_back(e.id);
    return out;
  };
  EXPECT_EQ(ids_of(stratified_split(m, 0.2, 1).validation), ids_of(s.validation));
  EXPECT_NE(ids_of(stratified_split(m, 0.2, 2).validation), ids_of(s.validation));
  // Both halves keep the manifest's order.
  auto in_order = [&](const Manifest& half) {
    std::vector<std::string> all = ids_of(m), part = ids_of(half);
    return std::includes(all.begin(), all.end(), part.begin(), part.end(),
                         [&](const std::string& x, const std::string& y) {
                           return std::find(all.begin(), all.end(), x) < std::find(all.begin(), all.end(), y);
                         });
  };
  EXPECT_TRUE(in_order(s.train));
  EXPECT_TRUE(in_order(s.validation));
}

TEST(Manifest, StratifiedSplitOfOneHotLabelsStratifiesByPattern) {
  Manifest m;
  m.classes = {"healthy", "rust"};
  m.label_kind = LabelKind::one_hot;
  for (int i = 0; i < 40; ++i) m.entries.push_back({.id = std::to_string(i), .one_hot = {i < 30 ? 1.f : 0.f, i < 30 ? 0.f : 1.f}});
  const ManifestSplit s = stratified_split(m, 0.25, 3);
  int rust = 0;
  for (const ManifestEntry& e : s.validation.entries) rust += e.one_hot[1] == 1.f;
  EXPECT_EQ(rust, 3);                             // round(0.25 × 10 rust)
  EXPECT_EQ(s.validation.entries.size(), 3u + 8);  // + round(0.25 × 30 healthy)
  Manifest unlabeled;
  EXPECT_NE(error_of([&] { stratified_split(unlabeled, 0.2, 1); }).find("no labels"), std::string::npos);
  EXPECT_NE(error_of([&] { stratified_split(m, 1.5, 1); }).find("validation_fraction"), std::string::npos);
}

}  // namespace convoy::records
