#pragma once
// Our own Huffman (entropy) decoder for baseline JPEGs, plugged into
// libjpeg-turbo in place of its own (docs/images.md, "JPEG decoding").
//
// Entropy decoding is most of the time of a DCT-scaled decode, and this one
// is faster than libjpeg-turbo's (one table lookup gives up to two
// coefficients' runs, lengths and values; the bit count is checked once per
// four lookups; the scan is unstuffed once, so the bit reader never looks
// for 0xFF). Everything else — IDCT, upsampling, colour conversion —
// stays libjpeg-turbo's, and the coefficients are the same, so the pixels
// are identical to libjpeg-turbo's alone.

struct jpeg_decompress_struct;

namespace convoy::image::detail {

// Call right after jpeg_start_decompress on a decompressor whose source is
// jpeg_mem_src. When the file is a single-scan, 8-bit, baseline Huffman
// JPEG, replaces libjpeg-turbo's entropy decoder with ours and returns true;
// otherwise (progressive, arithmetic, 12-bit, several scans) changes nothing
// and returns false. Damage is reported through libjpeg's error manager with
// libjpeg's own warning codes (premature end, bad Huffman code, missing
// restart marker), so callers see the same errors as before.
bool use_fast_huffman(jpeg_decompress_struct* cinfo);

// On by default; tests and benchmarks turn it off to compare with
// libjpeg-turbo's own decoder. Not meant to change while decodes run.
// The library reads no environment for it: the decode benchmark's
// CONVOY_JPEG_HUFFMAN=libjpeg (A/B timing) is read by bench/decode_convoy.
void set_fast_huffman_enabled(bool on);
bool fast_huffman_enabled();
// How many decodes have used it (tests check that it really ran).
long fast_huffman_uses();
// False where libjpeg-turbo's jpegint.h was missing at build time: then
// use_fast_huffman never takes over.
bool fast_huffman_available();

}  // namespace convoy::image::detail
