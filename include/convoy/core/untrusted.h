#pragma once
// What a file someone else wrote (a downloaded data set, model or config) may
// cost convoy, and the helpers every reader uses to hold it to that. The
// limits are stated in docs/reliability.md ("Hostile input").
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
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
// Fields in one CSV record (a line of 10 million commas would otherwise cost
// hundreds of MB in empty strings).
inline constexpr std::size_t kMaxCsvFields = 65'536;

// `value` as an error message may show it: at most `max` bytes, control bytes
// and broken UTF-8 escaped (\n, \x00), so the message stays one line; when
// cut, ends with "... (N bytes)".
std::string shown(std::string_view value, std::size_t max = kShownChars);
// A JSON value the same way, written out only up to `max` characters (never
// whole: a 100,000-deep array is not walked).
std::string shown_json(const nlohmann::json& value, std::size_t max = kShownChars);

// The whole of the file at `path`, at most `max_bytes` of it: a regular
// file's size is checked before a byte is read ("<path>: N bytes, more than
// the M a <what> may have"), a pipe (`--config <(...)`) is read up to the
// limit; a folder or a device (/dev/zero never ends) is refused, and a FIFO
// with no writer reads as empty rather than waiting. Every failure is one
// UserError naming the path.
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

}  // namespace convoy
