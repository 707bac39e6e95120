// The flow decoder against libipt on real emulated recordings (qemu-user
// and ptsnap's TCG plugin, full execution): the emulator's test programs
// (fib, signals, threads, fork, exec, a C++ exception, a jump table),
// CPython and `ls -lR`, with the default timing (CYC) and with
// --timer-resolution low (MTC). Every stream must decode to the same items
// (flow_decoder.h) with both decoders.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "emulate/emulate.h"
#include "perf/attr.h"
#include "tests/flow/trace_input.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::flow {
namespace {

class FlowDiffEmulated : public ::testing::TestWithParam<const char*> {
 protected:
  void Check(std::vector<std::string> cmd) {
    record::RecordOptions o;
    o.full_execution = true;
    o.command = cmd;
    auto timing = perf::ParseTiming(GetParam());
    ASSERT_TRUE(timing.has_value());
    o.timer = *timing;
    const auto dir = tmp_.path() / ("t" + std::to_string(n_++));
    auto r = emulate::RecordEmulated(o, dir);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    auto in = testing::LoadTrace(dir);
    ASSERT_TRUE(in.has_value()) << in.error().ToString();
    ASSERT_FALSE(in->streams.empty());
    uint64_t insns = 0;
    for (auto& s : in->streams) {
      const auto lib = DecodeWithLibipt(s.config, s.code->NewLibiptImage());
      const auto ours = DecodeWithFlow(s.config, s.code.get());
      s.code->FreeLibiptImages();
      const Comparison c = Compare(lib, ours);
      EXPECT_TRUE(c.all_equal) << cmd[0] << " pid " << s.pid << ": " << c.message;
      EXPECT_FALSE(c.unsupported);
      for (const Item& i : lib) insns += i.kind == ItemKind::kBlock ? i.ninsn : 0;
    }
    std::printf("%s (%s): %zu streams, %llu instructions, equal\n", cmd[0].c_str(), GetParam(),
                in->streams.size(), static_cast<unsigned long long>(insns));
    EXPECT_GT(insns, 1000u);
  }
  ::ptsnap::testing::TempDir tmp_;
  int n_ = 0;
};

TEST_P(FlowDiffEmulated, Fib) { Check({PTSNAP_EMU_FIB, "20"}); }
TEST_P(FlowDiffEmulated, Signals) { Check({PTSNAP_EMU_SIGNAL}); }
TEST_P(FlowDiffEmulated, Threads) { Check({PTSNAP_EMU_THREADS}); }
TEST_P(FlowDiffEmulated, Switch) { Check({PTSNAP_EMU_SWITCH}); }
TEST_P(FlowDiffEmulated, Exception) { Check({PTSNAP_EMU_EXCEPTION}); }
TEST_P(FlowDiffEmulated, Fork) { Check({PTSNAP_EMU_FORK}); }
TEST_P(FlowDiffEmulated, Python) {
  Check({"/usr/bin/python3", "-S", "-c", "import json; print(len(json.dumps(list(range(300)))))"});
}
TEST_P(FlowDiffEmulated, LsRecursive) { Check({"/bin/ls", "-lR", "/usr/share/doc/libipt2"}); }

INSTANTIATE_TEST_SUITE_P(Timing, FlowDiffEmulated, ::testing::Values("normal", "low"));

}  // namespace
}  // namespace ptsnap::flow
