// JPEG through libjpeg-turbo.
//
// libjpeg reports errors through a callback that must not return; its default
// calls exit(). Throwing a C++ exception through libjpeg's C frames is
// undefined, so the callback (jpeg_errors.h) longjmps back to a setjmp in
// run_decode / run_encode, which then returns false; the C++ caller throws.
// Nothing with a destructor lives in those frames between setjmp and the calls
// into libjpeg: everything they fill belongs to the caller.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "codec_internal.h"
#include "jpeg_errors.h"
#include "jpeg_huffman.h"
#include "convoy/core/error.h"

namespace convoy::image {
namespace {

using detail::JpegError;

struct Decompressor {
  jpeg_decompress_struct cinfo;
  JpegError err;
  Decompressor() {
    cinfo.err = detail::install_errors(&err);
    jpeg_create_decompress(&cinfo);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo); }
};

// Adobe's CMYK JPEGs store inverted ink amounts (what Photoshop writes, and
// what saw_Adobe_marker tells); plain CMYK is rare enough to treat the same.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = cmyk[3];
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>((cmyk[c] * k + 127) / 255);
  }
}

uint8_t gray_of(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 299 + rgb[1] * 587 + rgb[2] * 114 + 500) / 1000);
}

struct DecodeJob {
  std::span<const uint8_t> bytes;
  std::string_view name;
  DecodeOptions options;
  Image* out;
  int channels = 0;  // set by read_header
  bool cmyk = false;
};

// Up to the output size, which is all a decode's memory depends on: the
// caller reserves it (decode_budget.h) before read_pixels allocates.
bool read_header(Decompressor* d, DecodeJob* job) {
  jpeg_decompress_struct* cinfo = &d->cinfo;
  if (setjmp(d->err.jump)) return false;
  jpeg_mem_src(cinfo, job->bytes.data(), static_cast<unsigned long>(job->bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  // A file of several scans (progressive) is decoded through coefficients of
  // the whole image held at full size, whatever scale it is read at: the
  // scaled size checked below would let a small file claim 65535 x 65535 and
  // take gigabytes. Its full size is held to the pixel limit.
  if (jpeg_has_multiple_scans(cinfo))
    detail::check_dimensions(job->name, "JPEG", cinfo->image_width, cinfo->image_height);
  const bool file_gray = cinfo->jpeg_color_space == JCS_GRAYSCALE;
  job->cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  job->channels = job->options.channels != 0 ? job->options.channels : (file_gray ? 1 : 3);
  cinfo->out_color_space = job->cmyk ? JCS_CMYK : (job->channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
  cinfo->scale_num = 1;
  cinfo->scale_denom =
      static_cast<unsigned>(jpeg_scale_denominator(cinfo->image_width, cinfo->image_height, job->options));
  cinfo->dct_method = JDCT_ISLOW;  // the accurate one, as PIL and TF use
  jpeg_calc_output_dimensions(cinfo);
  detail::check_dimensions(job->name, "JPEG", cinfo->output_width, cinfo->output_height);
  return true;
}

// What the decode will hold: the output pixels, and a progressive file's
// coefficients (a 16-bit value per sample of every component, at full size).
uint64_t decode_bytes(const jpeg_decompress_struct& cinfo, int channels) {
  uint64_t bytes = uint64_t{cinfo.output_width} * cinfo.output_height * static_cast<uint64_t>(channels);
  if (jpeg_has_multiple_scans(const_cast<jpeg_decompress_struct*>(&cinfo)))
    bytes += uint64_t{cinfo.image_width} * cinfo.image_height * static_cast<uint64_t>(cinfo.num_components) * 2;
  return bytes;
}

bool read_pixels(Decompressor* d, const DecodeJob* job) {
  jpeg_decompress_struct* cinfo = &d->cinfo;
  if (setjmp(d->err.jump)) return false;
  const int channels = job->channels;
  const bool cmyk = job->cmyk;
  jpeg_start_decompress(cinfo);
  detail::use_fast_huffman(cinfo);  // our entropy decoder for baseline files; the rest stays libjpeg's
  Image& out = *job->out;
  if (!cmyk) {
    while (cinfo->output_scanline < cinfo->output_height) {
      JSAMPROW rows[8];
      const int n = std::min<int>(8, static_cast<int>(cinfo->output_height - cinfo->output_scanline));
      for (int i = 0; i < n; ++i) rows[i] = out.row(static_cast<int>(cinfo->output_scanline) + i);
      jpeg_read_scanlines(cinfo, rows, static_cast<JDIMENSION>(n));
    }
  } else {
    // Buffers from libjpeg's own pool are freed by jpeg_destroy_decompress,
    // whichever way the decode ends.
    const int w = out.width();
    JSAMPARRAY line = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                                  static_cast<JDIMENSION>(w * 7), 1);
    uint8_t* rgb = line[0] + w * 4;
    while (cinfo->output_scanline < cinfo->output_height) {
      const int y = static_cast<int>(cinfo->output_scanline);
      jpeg_read_scanlines(cinfo, line, 1);
      if (channels == 3) {
        cmyk_to_rgb(line[0], out.row(y), w);
      } else {
        cmyk_to_rgb(line[0], rgb, w);
        for (int x = 0; x < w; ++x) out.row(y)[x] = gray_of(rgb + 3 * x);
      }
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

struct Compressor {
  jpeg_compress_struct cinfo;
  JpegError err;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  Compressor() {
    cinfo.err = detail::install_errors(&err);
    jpeg_create_compress(&cinfo);
  }
  ~Compressor() {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);  // jpeg_mem_dest's buffer is malloc'd and left to us
  }
};

bool run_encode(Compressor* c, ImageView image, int quality) {
  jpeg_compress_struct* cinfo = &c->cinfo;
  if (setjmp(c->err.jump)) return false;
  jpeg_mem_dest(cinfo, &c->buffer, &c->size);
  cinfo->image_width = static_cast<JDIMENSION>(image.width);
  cinfo->image_height = static_cast<JDIMENSION>(image.height);
  cinfo->input_components = image.channels;
  cinfo->in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row = const_cast<uint8_t*>(image.row(static_cast<int>(cinfo->next_scanline)));
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

}  // namespace

namespace detail {

HeldImage decode_jpeg(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options) {
  Decompressor d;
  HeldImage out;
  DecodeJob job{bytes, name, options, &out.image};
  if (!read_header(&d, &job)) throw_corrupt(name, "JPEG", d.err.message);
  out.held = DecodeReservation(decode_bytes(d.cinfo, job.channels));
  out.image = Image(static_cast<int>(d.cinfo.output_width), static_cast<int>(d.cinfo.output_height), job.channels);
  if (!read_pixels(&d, &job)) throw_corrupt(name, "JPEG", d.err.message);
  return out;
}

}  // namespace detail

std::string encode_jpeg(ImageView image, int quality) {
  require(image.data && image.width > 0 && image.height > 0 && (image.channels == 1 || image.channels == 3),
          "encode_jpeg: the image must have pixels and 1 or 3 channels");
  require(quality >= 1 && quality <= 100, "encode_jpeg: quality must be in [1, 100], got " + std::to_string(quality));
  Compressor c;
  if (!run_encode(&c, image, quality)) throw std::runtime_error(std::string("encode_jpeg: ") + c.err.message);
  return std::string(reinterpret_cast<const char*>(c.buffer), c.size);
}

}  // namespace convoy::image
