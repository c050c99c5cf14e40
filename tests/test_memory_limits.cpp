// What a container's memory limit leaves, read from a cgroup file system laid
// out in a temporary folder as the kernel lays it out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "convoy/core/memory.h"
#include "test_helpers.h"

namespace convoy {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A container limited to 8 GiB that has just read 6 GiB of images: 7 GiB in
// use, 6 of them file cache the kernel drops before it kills anything. What
// is left is the limit less the working set, not less the cache.
TEST(MemoryLimits, ACgroupsFileCacheCountsAsAvailable) {
  testing::TempDir dir;
  write(std::filesystem::path(dir.path()) / "memory.max", std::to_string(8 * kGiB) + "\n");
  write(std::filesystem::path(dir.path()) / "memory.current", std::to_string(7 * kGiB) + "\n");
  write(std::filesystem::path(dir.path()) / "memory.stat",
        "anon " + std::to_string(kGiB) + "\nfile " + std::to_string(6 * kGiB) + "\nactive_file 0\ninactive_file " +
            std::to_string(6 * kGiB) + "\n");
  EXPECT_EQ(cgroup_available_bytes(dir.path()), 7 * kGiB);
}

TEST(MemoryLimits, NoLimitIsUnknownAndAVersion1LimitIsRead) {
  testing::TempDir none;
  write(std::filesystem::path(none.path()) / "memory.max", "max\n");
  write(std::filesystem::path(none.path()) / "memory.current", "12345\n");
  EXPECT_EQ(cgroup_available_bytes(none.path()), -1);

  testing::TempDir v1;
  write(std::filesystem::path(v1.path()) / "memory/memory.limit_in_bytes", std::to_string(4 * kGiB) + "\n");
  write(std::filesystem::path(v1.path()) / "memory/memory.usage_in_bytes", std::to_string(3 * kGiB) + "\n");
  write(std::filesystem::path(v1.path()) / "memory/memory.stat", "cache 1\ntotal_inactive_file " + std::to_string(kGiB) + "\n");
  EXPECT_EQ(cgroup_available_bytes(v1.path()), 2 * kGiB);

  testing::TempDir v1_unlimited;
  write(std::filesystem::path(v1_unlimited.path()) / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  write(std::filesystem::path(v1_unlimited.path()) / "memory/memory.usage_in_bytes", "1000\n");
  EXPECT_EQ(cgroup_available_bytes(v1_unlimited.path()), -1);
}

// Usage above the limit (the kernel lets it overshoot briefly) leaves nothing,
// never a negative size.
TEST(MemoryLimits, UsageOverTheLimitLeavesNothing) {
  testing::TempDir dir;
  write(std::filesystem::path(dir.path()) / "memory.max", std::to_string(kGiB) + "\n");
  write(std::filesystem::path(dir.path()) / "memory.current", std::to_string(2 * kGiB) + "\n");
  EXPECT_EQ(cgroup_available_bytes(dir.path()), 0);
}

}  // namespace
}  // namespace convoy
