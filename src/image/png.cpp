// PNG through libpng. As with libjpeg, errors must not unwind through C
// frames: libpng's error callback longjmps to the setjmp in run_decode /
// run_encode (png_jmpbuf), which returns false, and the C++ caller throws.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "codec_internal.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::image {
namespace {

struct PngState {
  std::span<const uint8_t> bytes;
  std::size_t offset = 0;
  std::string* sink = nullptr;  // encoding: the file being written
  char message[256] = {0};
};

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message);
  png_longjmp(png, 1);
}

// Ancillary-chunk problems (a bad sRGB profile, a bad CRC on a text chunk)
// leave the pixels intact: ignore them, as PIL does.
void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep out, png_size_t count) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (state->bytes.size() - state->offset < count) png_error(png, "unexpected end of file");
  std::memcpy(out, state->bytes.data() + state->offset, count);
  state->offset += count;
}

struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngState state;
  Reader() {
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, on_error, on_warning);
    if (png) info = png_create_info_struct(png);
    if (!png || !info) throw std::bad_alloc();
  }
  ~Reader() { png_destroy_read_struct(&png, &info, nullptr); }
};

struct DecodeJob {
  std::string_view name;
  DecodeOptions options;
  Image* out;
  std::vector<png_bytep>* rows;
  png_uint_32 width = 0, height = 0;  // set by read_header
  int channels = 0;
};

// Up to the output size, which is all a decode's memory depends on: the
// caller reserves it (decode_budget.h) before read_pixels allocates.
bool read_header(Reader* r, DecodeJob* job) {
  png_structp png = r->png;
  png_infop info = r->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, &r->state, read_bytes);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  detail::check_dimensions(job->name, "PNG", width, height);
  // Deflate shrinks data at most kMaxDeflateRatio:1, so the file's bytes bound its pixel
  // data (unfiltered rows, each with its filter byte; interlacing only adds
  // to that): a small file claiming a huge image is refused here, before
  // its pixels are reserved and allocated.
  const uint64_t row_bytes = (uint64_t{width} * png_get_channels(png, info) * png_get_bit_depth(png, info) + 7) / 8;
  if (uint64_t{height} * (1 + row_bytes) > kMaxDeflateRatio * r->state.bytes.size())
    detail::throw_corrupt(job->name, "PNG",
                          "its header claims " + std::to_string(width) + "x" + std::to_string(height) +
                              " pixels, more than its " + std::to_string(r->state.bytes.size()) + " bytes can hold");
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_strip_16(png);  // keeps the high byte
  // Any alpha goes, as PIL's convert("RGB"): the file's own channel, and the one
  // expanding a palette's tRNS transparency adds (most palette PNGs have one).
  png_set_strip_alpha(png);
  const bool file_color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  const int channels = job->options.channels != 0 ? job->options.channels : (file_color ? 3 : 1);
  if (channels == 3 && !file_color) png_set_gray_to_rgb(png);
  // ITU-R 601 luma (0.299, 0.587, 0.114), as PIL's convert("L") and libjpeg.
  if (channels == 1 && file_color) png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<png_size_t>(width) * channels)
    png_error(png, "unsupported pixel layout");
  job->width = width;
  job->height = height;
  job->channels = channels;
  return true;
}

bool read_pixels(Reader* r, const DecodeJob* job) {
  png_structp png = r->png;
  if (setjmp(png_jmpbuf(png))) return false;
  for (png_uint_32 y = 0; y < job->height; ++y) (*job->rows)[y] = job->out->row(static_cast<int>(y));
  png_read_image(png, job->rows->data());
  png_read_end(png, nullptr);
  return true;
}

void write_bytes(png_structp png, png_bytep data, png_size_t count) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  state->sink->append(reinterpret_cast<const char*>(data), count);
}

void flush_nothing(png_structp) {}

struct Writer {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngState state;
  Writer() {
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, on_error, on_warning);
    if (png) info = png_create_info_struct(png);
    if (!png || !info) throw std::bad_alloc();
  }
  ~Writer() { png_destroy_write_struct(&png, &info); }
};

bool run_encode(Writer* w, ImageView image, std::vector<png_bytep>* rows) {
  png_structp png = w->png;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, &w->state, write_bytes, flush_nothing);
  png_set_IHDR(png, w->info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               image.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, w->info);
  png_write_image(png, rows->data());
  png_write_end(png, w->info);
  return true;
}

}  // namespace

namespace detail {

HeldImage decode_png(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options) {
  Reader r;
  r.state.bytes = bytes;
  HeldImage out;
  std::vector<png_bytep> rows;
  DecodeJob job{name, options, &out.image, &rows};
  if (!read_header(&r, &job)) throw_corrupt(name, "PNG", r.state.message);
  const uint64_t pixels = uint64_t{job.width} * job.height * static_cast<uint64_t>(job.channels);
  out.held = DecodeReservation(pixels + uint64_t{job.height} * sizeof(png_bytep));
  out.image = Image(static_cast<int>(job.width), static_cast<int>(job.height), job.channels);
  rows.resize(job.height);
  if (!read_pixels(&r, &job)) throw_corrupt(name, "PNG", r.state.message);
  return out;
}

}  // namespace detail

std::string encode_png(ImageView image) {
  require(image.data && image.width > 0 && image.height > 0 && (image.channels == 1 || image.channels == 3),
          "encode_png: the image must have pixels and 1 or 3 channels");
  std::string file;
  Writer w;
  w.state.sink = &file;
  std::vector<png_bytep> rows(image.height);
  for (int y = 0; y < image.height; ++y) rows[y] = const_cast<uint8_t*>(image.row(y));
  if (!run_encode(&w, image, &rows)) throw std::runtime_error(std::string("encode_png: ") + w.state.message);
  return file;
}

}  // namespace convoy::image
