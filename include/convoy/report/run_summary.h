#pragma once
// summary.json: what a run did and measured, for people and for scripts
// (benchmarks, CI) to read.
#include <string>

#include "convoy/train/fit.h"

namespace convoy::report {

struct RunInfo {
  std::string model;
  std::string dataset;
  std::string device;
  std::string cpu_kernels;  // on the CPU: the kernel set that ran (core/cpu_info.h); empty: none
  std::string conv_algo;    // on the CPU: training.conv_algo (it changes the bits); empty: none
  // On the CPU: the slices each batch ran in (ExecutableInternals::batch_slices; 1:
  // per_op, the ops split across the threads); 0: not the CPU.
  int64_t batch_slices = 0;
  std::string precision = "fp32";  // training.precision
  int threads = 0;
  int64_t epochs = 0;
  int64_t batch_size = 0;
  double lr = 0, momentum = 0;
  uint64_t seed = 0;
  std::string evaluation_json;  // train::evaluation_json of the final test pass; empty: none
  int replicas = 1;  // data-parallel replicas (batch_size is per replica)
  std::string data_json;  // a JSON object about the image data (counts, skipped examples); empty: none
  std::string compared_json;  // a JSON array: other runs on the same data (transfer vs scratch); empty: none
};

std::string run_summary_json(const RunInfo& info, const train::History& history);

}  // namespace convoy::report
