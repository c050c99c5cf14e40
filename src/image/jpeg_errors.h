#pragma once
// libjpeg's error manager as convoy sets it up (src/image/jpeg.cpp, and
// bench/huffman_vs_turbo.cpp, which must fail on the same files as a decode).
//
// libjpeg reports errors through a callback that must not return. Throwing a
// C++ exception through libjpeg's C frames is undefined, so the callback
// longjmps to the caller's setjmp(err.jump) with the message in err.message;
// nothing with a destructor may live in the frames between the two.
#include <csetjmp>
#include <cstddef>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared first. A file that wants
// libjpeg's internals (JPEG_INTERNALS) includes jpeglib.h before this.
#include <jpeglib.h>

namespace convoy::image::detail {

struct JpegError {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// Sets err up and returns the manager for cinfo.err. Errors, and warnings
// that mean pixels are missing or wrong (a truncated photo would otherwise
// train as a grey smear), longjmp to err->jump; benign warnings (unknown
// JFIF revision, stray bytes before a marker) are ignored, as PIL and TF do.
jpeg_error_mgr* install_errors(JpegError* err);

}  // namespace convoy::image::detail
