#include "jpeg_errors.h"

// (jerror.h's message codes after jpeglib.h, as libjpeg's own sources include them)
#include <jerror.h>

namespace convoy::image::detail {
namespace {

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

bool is_data_damage(int code) {
  switch (code) {
    case JWRN_JPEG_EOF: case JWRN_HIT_MARKER: case JWRN_HUFF_BAD_CODE: case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC: case JWRN_BOGUS_PROGRESSION: case JWRN_NOT_SEQUENTIAL:
      return true;
    default:
      return false;
  }
}

void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && is_data_damage(cinfo->err->msg_code)) on_error(cinfo);
}

}  // namespace

jpeg_error_mgr* install_errors(JpegError* err) {
  jpeg_std_error(&err->mgr);
  err->mgr.error_exit = on_error;
  err->mgr.emit_message = on_message;
  err->message[0] = '\0';
  return &err->mgr;
}

}  // namespace convoy::image::detail
