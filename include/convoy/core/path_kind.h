#pragma once
// What a path a user gave is, in the words an error message uses, so that a
// file where a folder belongs (or the other way round) is named as what it
// is, not as missing.
#include <string>

#include <sys/types.h>

namespace convoy {

// What a file of this st_mode is, in path_kind's words: "a folder", "a
// file", "a pipe (FIFO)" or "a device or socket" (for a file already open).
std::string mode_kind(mode_t mode);

// "a file", "a folder", "a pipe (FIFO)", "a device or socket", "a broken
// symbolic link", "missing", or "unreadable (<why>)" (a link loop, no
// permission). Links are followed.
std::string path_kind(const std::string& path);

// Unless `path` is a folder (links followed), throws UserError
// "<named><path>: <what it is instead>; <todo>": "no such folder", "is a file,
// not a folder", "cannot be read (<why>)", ... `named` is the setting with a
// trailing space ("data.dir (--data) "), or empty.
void require_folder(const std::string& path, const std::string& named, const std::string& todo);

}  // namespace convoy
