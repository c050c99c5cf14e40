#pragma once
// What a file someone else wrote (a downloaded data set, model or config) may
// cost convoy, and the helpers every reader uses to hold it to that. The
// limits are stated in docs/reliability.md ("Hostile input").
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace convoy {

// Characters of a value from a file that an error message shows; the rest is
// cut (and counted), so no file can make a message long.
inline constexpr std::size_t kShownChars = 48;
// The longest error line the CLI prints; a longer one is cut in the middle.
inline constexpr std::size_t kMaxMessageChars = 300;
// How deep JSON arrays and objects, and YAML sequences and maps, may nest.
inline constexpr int kMaxNesting = 64;
// How many values a YAML config may expand to, an alias counted at each use.
inline constexpr int64_t kMaxYamlNodes = 100'000;
// Files read whole into memory: a run config, a manifest CSV, a model file
// (safetensors weights or checkpoint, ONNX: protobuf's own limit is 2 GiB).
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxCsvBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxModelBytes = uint64_t{16} << 30;
// The most a deflate stream (zlib, gzip, PNG's IDAT) expands: 1032:1, zlib's
// documented bound. A compressed file's size times this bounds what it holds.
inline constexpr uint64_t kMaxDeflateRatio = 1032;
// Fields in one CSV record (a line of 10 million commas would otherwise cost
// hundreds of MB in empty strings).
inline constexpr std::size_t kMaxCsvFields = 65'536;

// `value` as an error message may show it: at most `max` bytes, control bytes
// and broken UTF-8 escaped (\n, \x00), so the message stays one line; when
// cut, ends with "... (N bytes)".
std::string shown(std::string_view value, std::size_t max = kShownChars);
// The first eight names, each through shown(), comma-separated, then "and N
// more": a message stays short however many there are.
std::string shown_list(const std::vector<std::string>& names);
// Whether `value` is UTF-8 text (what JSON, and so every file convoy writes
// names into, can hold). A file name from another system may not be.
bool valid_utf8(std::string_view value);
// The longest prefix of `value` of at most `max` bytes that ends before a
// UTF-8 character starts: a cut there leaves no half character behind.
std::size_t utf8_prefix_length(std::string_view value, std::size_t max);
// Whether `value` holds an ASCII control byte (0x00-0x1f, 0x7f): a tab, a
// newline or an escape that a CSV, a report or a terminal would garble.
bool holds_control_bytes(std::string_view value);
// Why `name` cannot be a class name, or nullptr when it can: a class name
// from a folder, a CSV or data.classes must be one a folder, a CSV column, a
// report and the JSON files a run writes (UTF-8 only) can hold: not empty,
// ".", "..", only quotes, holding control bytes, nor other than UTF-8.
const char* class_name_fault(std::string_view name);
// UserError "<where>: class name '<name>' <why>; <todo>" when
// class_name_fault(name) says why, `where` saying where the name came from.
void require_class_name(const std::string& name, const std::string& where, const std::string& todo);
// Why a batch norm cannot take this eps or momentum (the new batch's
// weight, PyTorch's meaning), or nullptr: "must be positive and finite",
// "must be in [0, 1]". NaN fails both. eps 0 divides a constant channel's
// zero variance by zero; a momentum outside [0, 1] makes the running
// statistics grow without bound. One rule for a config's layers and ONNX.
const char* batch_norm_eps_fault(double eps);
const char* batch_norm_momentum_fault(double momentum);
// Hidden entries of a folder that no image walk takes: names starting with
// '.' (.DS_Store, macOS's ._photo.jpg, .ipynb_checkpoints/) and __MACOSX/
// (what unzipping a Mac's zip leaves). Thumbs.db is no image name anyway.
bool hidden_entry(const std::filesystem::path& path);
// The bytes of a tensor of `shape` with `element_bytes`-byte elements, zero
// sizes counted as 1 (so an empty tensor's other sizes are bounded too), or
// nothing when that is more than `available` or a size is negative. Checked
// size by size before multiplying, so no shape a file declares can overflow:
// every reader of a shape from a file holds it to what the file can hold
// with this before allocating.
std::optional<uint64_t> shape_bytes_within(std::span<const int64_t> shape, uint64_t element_bytes, uint64_t available);
// A JSON value the same way, written out only up to `max` characters (never
// whole: a 100,000-deep array is not walked).
std::string shown_json(const nlohmann::json& value, std::size_t max = kShownChars);

// What a file read whole may be, and how its errors read: "<name>: N bytes,
// more than the M <a what> may have<limit_key>; <advice>".
struct FileLimit {
  std::string what;         // "run config", "image": what the user should name
  uint64_t max_bytes = 0;
  bool pipes = true;        // false: a pipe is refused like a device (image files)
  std::string limit_key;    // the setting that raises the limit, shown as " (key)"; empty: none
  std::string advice = "is it the right file?";
};

// How a file read whole turned out.
struct FileRead {
  std::size_t size = 0;
  bool regular = true;  // false: a pipe (`--config <(...)`), whose folder means nothing
};

// The one reader of untrusted files read whole. It opens `path` without
// blocking (a FIFO without a writer would wait forever), refuses a folder, a
// device or socket (/dev/zero never ends) and, unless `limit.pipes`, a pipe;
// checks a regular file's size before a byte is read; reads a pipe up to the
// limit, refusing one that gives nothing. The bytes go to `buffer(n)`, which
// must return room for n bytes keeping the first ones it already holds (as
// std::string::resize); it is called once for a regular file, with its size,
// and with growing sizes for a pipe, the last with the exact size. Every
// failure is one UserError naming `name` (empty: the path).
FileRead read_file_into(const std::string& path, const FileLimit& limit,
                        const std::function<char*(std::size_t)>& buffer, const std::string& name = {});

// The whole of the file at `path` through read_file_into: a <what> of at most
// `max_bytes`, a pipe read up to the limit.
std::string read_file_bounded(const std::string& path, uint64_t max_bytes, const std::string& what);

// A message cut to kMaxMessageChars: its head and its tail (the advice) kept.
std::string one_line(std::string_view message);

// Parses untrusted JSON: nesting deeper than kMaxNesting and a key given twice
// in one object are refused, as is malformed JSON; each is a UserError
// "<what> (<why>)", the why cut with shown().
nlohmann::json parse_json_bounded(std::string_view text, const std::string& what);

// Whether `path` is `folder` or lies below it, links resolved as far as they
// exist (false when either cannot be resolved).
bool lies_within(const std::filesystem::path& path, const std::filesystem::path& folder);

// Where an output folder may not be: the file system's root, the folder
// `data` that is read, nor (`inside_refused`: class folders, whose files a
// next run would read as images) anywhere inside it. `what` names the flag
// ("output.dir (--out)", "shards --out"), `example` a better one
// ("--out runs/first"). UserError naming the folder otherwise; `data` may be
// empty (nothing read).
void require_output_placed(const std::string& out, const std::string& data, bool inside_refused,
                           const std::string& what, const std::string& example);

// The path rule for ids read from files: a relative path must name a place
// inside the root. It may not be absolute, hold a ".." segment or a NUL byte,
// and as far as it exists, neither it nor any folder on the way may be a
// symbolic link that leads out of the root (links that stay inside are fine;
// the root itself may be a link). The root's own links are resolved once.
class PathRoot {
 public:
  explicit PathRoot(std::filesystem::path root);
  // Why `relative` is not inside the root, or nothing when it is.
  std::optional<std::string> outside(const std::string& relative) const;

 private:
  std::filesystem::path root_, real_;  // real_: empty when the root does not exist
};

// `folder`/`relative` for a file a data set names by a relative path
// (data.train_csv, data.test_csv, data.files): the path rule above applies, so
// a train.csv linked to /etc/passwd is refused (its header was echoed in an
// error) rather than read. An absolute `relative` is the user's own choice and
// is returned as it is. `what` names the setting in the error.
std::string path_in_data_folder(const std::string& folder, const std::string& relative, const std::string& what);

}  // namespace convoy
