// read_folder_manifest: root/<class>/**/<image>, as Keras'
// image_dataset_from_directory infers labels: classes are the subfolders
// sorted by name, files are sorted by path.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "convoy/records/manifest.h"
#include "records/bad_entries.h"

namespace convoy::records {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool wanted(const fs::path& p, const std::vector<std::string>& extensions) {
  const std::string ext = lower(p.extension().string());
  return std::any_of(extensions.begin(), extensions.end(), [&](const std::string& e) { return lower(e) == ext; });
}

std::vector<std::string> subfolders(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;  // a broken or looping link is no folder: not a class
  for (const fs::directory_entry& d : fs::directory_iterator(root))
    if (!hidden_entry(d.path()) && d.is_directory(ec)) names.push_back(d.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A class folder must itself stay inside the root (data.classes may name
// '../x' or '/', a class folder may be a link to '/'): checked before its
// walk, which would otherwise list the whole file system to refuse each file.
void check_class_folder(const PathRoot& rule, const std::string& root, const std::vector<std::string>& classes,
                        std::size_t c) {
  const std::string& name = classes[c];
  if (const auto why = rule.outside(name))
    throw UserError(root + ": class folder '" + shown(name) + "' leads outside the data folder (" + *why +
                    "); copy its images into the folder instead of linking it");
  for (std::size_t k = 0; k < c; ++k)
    require(classes[k] != name, root + ": data.classes names '" + shown(name) + "' twice; name each class once");
}

}  // namespace

Manifest read_folder_manifest(const std::string& root, const FolderManifestOptions& options) {
  std::error_code ec;
  require_folder(root, "", "pass a folder with one subfolder per class");
  Manifest m;
  m.label_kind = LabelKind::index;
  std::string extensions;
  for (const std::string& e : options.extensions) extensions += (extensions.empty() ? "" : ", ") + e;
  BadEntries bad(root, "file", options.on_bad_example);
  const PathRoot rule(root);
  try {
    m.classes = options.classes.empty() ? subfolders(root) : options.classes;
    require(!m.classes.empty(), root + ": no class subfolders; put each class's images in root/<class>/");
    for (const std::string& name : m.classes)
      require_class_name(name, root + (options.classes.empty() ? ", a class folder" : " (data.classes)"),
                         options.classes.empty() ? "rename the folder" : "fix data.classes");
    std::vector<std::string> kept;  // the classes with images (all of data.classes)
    for (std::size_t c = 0; c < m.classes.size(); ++c) {
      check_class_folder(rule, root, m.classes, c);
      const fs::path dir = fs::path(root) / m.classes[c];
      require(fs::is_directory(dir, ec), dir.string() + ": class folder missing; create it or drop the class");
      std::vector<fs::path> files;
      // Links below a class folder are not followed (as Keras' default), so a
      // link cycle cannot make the walk endless. An image name whose link is
      // broken or loops is a bad file; another such name is not an image.
      for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        const fs::directory_entry& f = *it;
        if (hidden_entry(f.path())) {  // never an image, nor a folder of them
          it.disable_recursion_pending();
          continue;
        }
        if (!wanted(f.path(), options.extensions)) continue;
        if (f.is_regular_file(ec))
          files.push_back(f.path());
        else if (ec && f.is_symlink())
          bad.add(f.path().lexically_relative(root).string(), "a link that cannot be followed (" + ec.message() + ")",
                  "fix or remove the link");
      }
      // An inferred class without images is a leftover folder, not a class to learn (its
      // output would never be trained); classes named by data.classes may be empty on purpose.
      if (files.empty() && options.classes.empty()) {
        bad.add(m.classes[c] + "/", "a class folder with no images (" + extensions + ")",
                "add its images, or remove the folder");
        continue;  // skip: not a class
      }
      const auto label = static_cast<int32_t>(kept.size());
      kept.push_back(m.classes[c]);
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        // Class folders and files may be links, but only to places inside the root.
        if (const auto why = rule.outside(f.lexically_relative(root).string())) {
          bad.add(f.lexically_relative(root).string(), "leads outside the data folder (" + *why + ")",
                  "copy the image into the folder instead of linking it");
          continue;
        }
        m.entries.push_back({.id = f.lexically_relative(root).string(),
                             .path = f.string(),
                             .label = label,
                             .one_hot = {},
                             .where = f.string()});
      }
    }
    m.classes = std::move(kept);
  } catch (const fs::filesystem_error& e) {
    throw UserError(root + ": cannot list the folder (" + e.code().message() + " at " + e.path1().string() +
                    "); check permissions");
  }
  m.skipped = bad.finish(options.log);
  require(!m.entries.empty(), root + ": no images (" + extensions + ") in its class folders");
  return m;
}

}  // namespace convoy::records
