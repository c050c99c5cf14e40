#include "fault_injection.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace convoy::train {
namespace {

class StepPacer final : public Callback {
 public:
  explicit StepPacer(int ms) : ms_(ms) {}
  void on_epoch_begin(FitState& s) override { last_step_ = s.step; }
  void on_step_end(FitState& s) override {
    // s.step may have advanced by several steps (one execution of n batches).
    std::this_thread::sleep_for(std::chrono::milliseconds(int64_t{ms_} * std::max<int64_t>(1, s.step - last_step_)));
    last_step_ = s.step;
  }

 private:
  int ms_;
  int64_t last_step_ = 0;
};

}  // namespace

void test_pause(int ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::shared_ptr<Callback> step_pacer(int step_delay_ms) {
  return step_delay_ms > 0 ? std::make_shared<StepPacer>(step_delay_ms) : nullptr;
}

}  // namespace convoy::train
