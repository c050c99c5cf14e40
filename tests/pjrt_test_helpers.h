#pragma once
// Shared by the PJRT tests: skip, naming why, where no PJRT CPU plugin can
// run (a build without pjrt_c_api.h, or no plugin in .peers/py: bash
// setup.sh installs both).
#include <gtest/gtest.h>

#include "convoy/backends/devices.h"

#define REQUIRE_PJRT()                                                                   \
  do {                                                                                   \
    const convoy::PjrtReport& report = convoy::find_pjrt("pjrt");                        \
    if (!report.usable()) GTEST_SKIP() << "no PJRT CPU plugin: " << report.why_unusable; \
  } while (0)

namespace convoy::testing {

// Tears the PJRT clients down after the last test, before static objects go
// (release_pjrt_clients in backends/devices.h says why).
class ReleasePjrtClients : public ::testing::Environment {
 public:
  void TearDown() override { release_pjrt_clients(); }
};

}  // namespace convoy::testing
