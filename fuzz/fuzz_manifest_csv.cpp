// A manifest CSV as the image workflow and `convoy shards` read it
// (records::read_csv_manifest): ids, labels as class names or 0/1 columns,
// bad rows failed or skipped. The first byte picks the options; the rest is
// the CSV, whose images folder is the CSV's own (no image is opened). It
// returns entries whose labels lie among its classes and whose paths stay
// inside the folder, or throws UserError.
#include <cstdint>
#include <filesystem>
#include <string>

#include "convoy/core/error.h"
#include "convoy/records/manifest.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  const std::string path = convoy::fuzz::input_file(data + 1, size - 1, ".csv");
  convoy::records::CsvManifestOptions o;
  if (pick & 1) o.label_column = "label";
  if (pick & 2) o.classes = {"healthy", "rust"};
  o.on_bad_example = pick & 4 ? convoy::data::OnBadExample::skip : convoy::data::OnBadExample::fail;
  o.one_class_per_row = (pick & 8) != 0;
  o.image_dir = ".";
  o.extension = pick & 16 ? "" : ".jpg";
  o.check_files = false;
  o.log = [](const std::string&) {};
  try {
    const convoy::records::Manifest m = convoy::records::read_csv_manifest(path, o);
    const std::string folder = path.substr(0, path.rfind('/') + 1);
    for (const auto& e : m.entries) {
      if (e.id.empty() || e.path.compare(0, folder.size(), folder) != 0) __builtin_trap();
      // The prefix alone would pass "<folder>../x": any ".." segment escapes.
      for (const auto& part : std::filesystem::path(e.path))
        if (part == "..") __builtin_trap();
      if (m.label_kind == convoy::records::LabelKind::index &&
          (e.label < 0 || e.label >= static_cast<int32_t>(m.classes.size())))
        __builtin_trap();
      if (m.label_kind == convoy::records::LabelKind::one_hot && e.one_hot.size() != m.classes.size()) __builtin_trap();
    }
  } catch (const convoy::UserError&) {
  }
  return 0;
}
