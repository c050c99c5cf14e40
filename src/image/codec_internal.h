#pragma once
// Shared by the codec sources: the per-format entry points and error wording.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "convoy/image/codec.h"

namespace convoy::image::detail {

// Each reserves its decode's memory (decode_budget.h) after the header, before it allocates.
HeldImage decode_jpeg(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options);
HeldImage decode_png(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options);

// "<name>: truncated or corrupt <format> (<why>); re-export it or set on_bad_example: skip"
[[noreturn]] void throw_corrupt(std::string_view name, const char* format, const std::string& why);

// Refuses images whose pixels would not fit in memory (a corrupt header can
// claim 65535 x 65535), before anything is allocated.
void check_dimensions(std::string_view name, const char* format, uint64_t width, uint64_t height);

}  // namespace convoy::image::detail
