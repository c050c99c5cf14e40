#include "convoy/core/untrusted.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Length of the valid UTF-8 sequence at s[i] (2 to 4 bytes), or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

// Writes `j` into `out` until `out` passes `max`; the depth is bounded by the
// budget too, since each level adds a character.
void write_bounded(const json& j, std::string& out, std::size_t max) {
  if (out.size() > max) return;
  if (j.is_string()) {
    out += '"' + shown(j.get_ref<const std::string&>(), max - std::min(max, out.size())) + '"';
  } else if (j.is_array() || j.is_object()) {
    out += j.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end() && out.size() <= max; ++it) {
      if (!first) out += ", ";
      first = false;
      if (j.is_object()) out += '"' + shown(it.key(), max) + "\": ";
      write_bounded(*it, out, max);
    }
    out += j.is_array() ? ']' : '}';
  } else if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    // JSON has no NaN or infinity (dump() writes null): say what the user gave.
    const double v = j.get<double>();
    out += std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  } else {
    out += j.dump();
  }
}

}  // namespace

namespace {

// Printable ASCII and valid UTF-8 kept, control bytes and invalid UTF-8 as
// escapes. A value escapes its backslashes (so "\\x00" is told from a NUL
// byte); a whole message does not, or the escapes its values already hold
// would be escaped twice.
std::string escaped(std::string_view value, std::size_t max, bool escape_backslash) {
  std::string out;
  std::size_t i = 0;
  for (; i < value.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x7F && (c != '\\' || !escape_backslash)) {
      out += static_cast<char>(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (const std::size_t n = c >= 0x80 ? utf8_length(value, i) : 0; n) {
      out.append(value.substr(i, n));
      i += n - 1;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (i < value.size()) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

}  // namespace

std::string shown(std::string_view value, std::size_t max) { return escaped(value, max, true); }

bool valid_utf8(std::string_view value) {
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (static_cast<unsigned char>(value[i]) < 0x80) continue;
    const std::size_t n = utf8_length(value, i);
    if (n == 0) return false;
    // As strict as JSON writers are: no overlong forms, surrogates or code points past U+10FFFF.
    const auto lead = static_cast<unsigned char>(value[i]), next = static_cast<unsigned char>(value[i + 1]);
    if ((lead == 0xE0 && next < 0xA0) || (lead == 0xED && next > 0x9F) || (lead == 0xF0 && next < 0x90) ||
        (lead == 0xF4 && next > 0x8F))
      return false;
    i += n - 1;
  }
  return true;
}

std::size_t utf8_prefix_length(std::string_view value, std::size_t max) {
  if (max >= value.size()) return value.size();
  while (max > 0 && (static_cast<unsigned char>(value[max]) & 0xC0) == 0x80) --max;
  return max;
}

bool hidden_entry(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with('.') || name == "__MACOSX";
}

std::string shown_json(const json& value, std::size_t max) {
  std::string out;
  write_bounded(value, out, max);
  if (out.size() <= max) return out;
  out.resize(max);
  return shown(out, max) + "...";
}

std::optional<uint64_t> shape_bytes_within(std::span<const int64_t> shape, uint64_t element_bytes,
                                           uint64_t available) {
  uint64_t bytes = element_bytes;
  if (bytes > available) return std::nullopt;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const uint64_t n = std::max<uint64_t>(static_cast<uint64_t>(d), 1);
    if (bytes > available / n) return std::nullopt;
    bytes *= n;
  }
  return bytes;
}

std::string one_line(std::string_view message) {
  std::string line = escaped(message, std::string::npos, false);  // escapes line ends, keeps UTF-8
  if (line.size() <= kMaxMessageChars) return line;
  const std::size_t tail = kMaxMessageChars / 3, head = kMaxMessageChars - tail - 5;
  // Cut on UTF-8 character starts so the result stays valid.
  const std::size_t h = utf8_prefix_length(line, head), t = utf8_prefix_length(line, line.size() - tail);
  return line.substr(0, h) + " ... " + line.substr(t);
}

FileRead read_file_into(const std::string& path, const FileLimit& limit,
                        const std::function<char*(std::size_t)>& buffer, const std::string& name) {
  const std::string& named = name.empty() ? path : name;
  const std::string& what = limit.what;
  const char* a = std::string_view("aeiouAEIOU").find(what.empty() ? 'x' : what[0]) == std::string_view::npos ? "a " : "an ";
  const auto fail = [&](const std::string& why, const std::string& advice) {
    return UserError(named + ": " + why + "; " + advice);
  };
  const auto too_big = [&](const std::string& size) {
    return fail(size + " bytes, more than the " + std::to_string(limit.max_bytes) + " " + a + what + " may have" +
                    (limit.limit_key.empty() ? "" : " (" + limit.limit_key + ")"),
                limit.advice);
  };
  const auto system_error = [&](const char* doing) {
    return fail(std::string(doing) + " the " + what + " (" + std::strerror(errno) + ")", "check the file");
  };
  // O_NONBLOCK for the open only: a FIFO without a writer would block it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw fail(std::string("cannot open the ") + what + " (" + std::strerror(errno) + ")", "check the path");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw system_error("cannot read");
  if (S_ISDIR(st.st_mode)) throw fail("is a folder", std::string("name ") + a + what);
  const bool regular = S_ISREG(st.st_mode);
  if (!regular && !(limit.pipes && S_ISFIFO(st.st_mode)))
    throw fail(limit.pipes ? "not a regular file (a device or socket)" : "not a regular file (a pipe, socket or device)",
               std::string("name ") + a + what);
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) throw system_error("cannot read");
  if (regular && static_cast<uint64_t>(st.st_size) > limit.max_bytes) throw too_big(std::to_string(st.st_size));
  std::size_t room = regular ? static_cast<std::size_t>(st.st_size) : 0, done = 0;
  char* bytes = buffer(room);
  for (;;) {
    if (done == room) {
      if (regular) break;  // no more than fstat said: a file growing meanwhile is read as it was
      if (room > limit.max_bytes) throw too_big("over " + std::to_string(limit.max_bytes));
      room = static_cast<std::size_t>(std::min<uint64_t>(limit.max_bytes + 1, std::max<std::size_t>(2 * room, 1 << 16)));
      bytes = buffer(room);
    }
    const ssize_t n = ::read(fd, bytes + done, room - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw system_error("cannot read");
    if (n == 0) {
      // A regular file that got shorter since fstat: its bytes are not all there.
      if (regular) throw fail("cannot read the " + what + " (it got shorter while read)", "check the file");
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  // A pipe no program writes to ends at once: not an empty file, which a config could be.
  if (!regular && done == 0)
    throw fail("a pipe that gave nothing (does a program write to it?)", std::string("name ") + a + what);
  if (!regular) buffer(done);
  return {.size = done, .regular = regular};
}

std::string read_file_bounded(const std::string& path, uint64_t max_bytes, const std::string& what) {
  std::string bytes;
  read_file_into(path, {.what = what, .max_bytes = max_bytes}, [&](std::size_t n) {
    bytes.resize(n);
    return bytes.data();
  });
  return bytes;
}

json parse_json_bounded(std::string_view text, const std::string& what) {
  // Keys seen in each open object (an empty set stands for an open array).
  std::vector<std::vector<std::string>> open;
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxNesting)
          throw UserError(what + " (nested deeper than " + std::to_string(kMaxNesting) +
                          " levels, more than convoy reads)");
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end: open.pop_back(); break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        auto& keys = open.back();
        for (const std::string& k : keys)
          if (k == key) throw UserError(what + " (the key '" + shown(key) + "' appears twice in one object)");
        keys.push_back(key);
        break;
      }
      case json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    return json::parse(text, guard);
  } catch (const json::exception& e) {
    throw UserError(what + " (" + shown(std::string_view(e.what()), 160) + ")");
  }
}

bool holds_control_bytes(std::string_view value) {
  return std::any_of(value.begin(), value.end(), [](char ch) {
    const auto b = static_cast<unsigned char>(ch);
    return b < 0x20 || b == 0x7f;
  });
}

const char* class_name_fault(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return "is a folder's own or parent link";
  if (name.find_first_not_of("\"'") == std::string_view::npos) return "is only quotes";
  if (holds_control_bytes(name)) return "holds control bytes (a tab, newline or escape)";
  // Class names go into every JSON file a run writes (run config, checkpoint, -shards.json).
  if (!valid_utf8(name)) return "is not UTF-8 text (saved in another encoding, such as cp1252 or Latin-1?)";
  return nullptr;
}

void require_class_name(const std::string& name, const std::string& where, const std::string& todo) {
  if (const char* why = class_name_fault(name))
    throw UserError(where + ": class name '" + shown(name) + "' " + why + "; " + todo);
}

const char* batch_norm_eps_fault(double eps) {
  return eps > 0 && std::isfinite(eps) ? nullptr : "must be positive and finite";
}

const char* batch_norm_momentum_fault(double momentum) {
  return momentum >= 0 && momentum <= 1 ? nullptr : "must be in [0, 1]";
}

std::string shown_list(const std::vector<std::string>& names) {
  constexpr std::size_t kNamed = 8;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kNamed; ++i) out += (i ? ", " : "") + shown(names[i]);
  if (names.size() > kNamed) out += " and " + std::to_string(names.size() - kNamed) + " more";
  return out;
}

bool lies_within(const fs::path& path, const fs::path& folder) {
  std::error_code ec, ec2;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const fs::path f = fs::weakly_canonical(fs::absolute(folder, ec2), ec2);
  if (ec || ec2) return false;
  const fs::path inside = p.lexically_relative(f);
  return !inside.empty() && *inside.begin() != "..";
}

void require_output_placed(const std::string& out, const std::string& data, bool inside_refused,
                           const std::string& what, const std::string& example) {
  // The root or the data's own folder: the outputs (and --overwrite's
  // replacements) would land among the system's or the data's files, where
  // a user cannot tell them apart or remove them safely.
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(fs::absolute(out, ec), ec);
  require(ec || real != real.root_path(), what + " " + shown(out) +
                                              ": is the file system's root; give the output a folder of its own, "
                                              "e.g. " + example);
  if (data.empty()) return;
  // Outputs inside class folders would be the next run's data (a class 'run1', curves.png an image).
  if (inside_refused && lies_within(out, data))
    throw UserError(what + " " + shown(out) + ": inside the data folder " + shown(data) +
                    ", where the next run would read its files as images; pick a folder outside it");
  require(!(lies_within(out, data) && lies_within(data, out)),
          what + " " + shown(out) + ": is the data folder " + shown(data) +
              "; the outputs would mix with the data's files, so give them a folder of their own, e.g. " + example);
}

std::string path_in_data_folder(const std::string& folder, const std::string& relative, const std::string& what) {
  if (fs::path(relative).is_absolute()) return relative;
  if (const std::optional<std::string> why = PathRoot(folder).outside(relative))
    throw UserError(what + " " + shown(relative) + ": leads outside the data folder " + shown(folder, 160) + " (" +
                    *why + "); copy the file into the folder, or give its absolute path");
  return (fs::path(folder) / relative).string();
}

PathRoot::PathRoot(fs::path root) : root_(std::move(root)) {
  std::error_code ec;
  if (fs::exists(root_, ec)) real_ = fs::canonical(root_, ec);
  if (ec) real_.clear();
}

std::optional<std::string> PathRoot::outside(const std::string& relative) const {
  if (relative.find('\0') != std::string::npos) return "it holds a NUL byte";
  const fs::path r(relative);
  if (r.has_root_directory() || r.has_root_name()) return "it is an absolute path";
  for (const fs::path& part : r)
    if (part == "..") return "it has a '..' segment";
  // Links are resolved as far as the path exists (a missing file is the
  // caller's to report, but a link on the way to it still counts).
  if (real_.empty()) return std::nullopt;  // no root: nothing can be reached through it
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(root_ / r, ec);
  if (ec) return "its links cannot be followed (" + ec.message() + ")";
  const fs::path inside = real.lexically_relative(real_);
  if (inside.empty() || *inside.begin() == "..")
    return "it is a symbolic link (or passes through one) that leads outside";
  return std::nullopt;
}

}  // namespace convoy
