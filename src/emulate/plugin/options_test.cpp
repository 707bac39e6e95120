#include <gtest/gtest.h>

#include <vector>

#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {
namespace {

Result<Options> Parse(std::vector<const char*> args) {
  return ParseOptions(static_cast<int>(args.size()), args.data());
}

// The arguments the driver passes come back as the plugin's options; every
// one but exec= is kept, in order, for the qemu-x86_64 a followed execve
// starts (exec= names that image's own hand-over file).
TEST(PluginOptions, TheDriversArgumentsAreParsed) {
  const FilterRange f{.trace_stop = false, .offset = 0x1130, .size = 0x40, .path = "/bin/x"};
  const std::string filter = "filter=" + FormatFilterArg(f);
  auto o =
      Parse({"out=/w", "mode=full", "psb=0x4000", "mtc=1", "mtc_freq=3", "cyc=1", "trigger=0x1139",
             "trigger=4096", "only_in=0x20", filter.c_str(), "exec=/w/exec-carry.7", "waits=1"});
  ASSERT_TRUE(o) << o.error().ToString();
  EXPECT_EQ(o->out, "/w");
  EXPECT_TRUE(o->full);
  EXPECT_EQ(o->psb_period, 0x4000u);
  EXPECT_TRUE(o->mtc && o->cyc);
  EXPECT_EQ(o->mtc_freq, 3u);
  EXPECT_EQ(o->trigger, (std::vector<uint64_t>{0x1139, 4096}));
  EXPECT_EQ(o->only_in, 0x20u);
  ASSERT_EQ(o->filters.size(), 1u);
  EXPECT_EQ(o->filters[0], f);
  EXPECT_TRUE(o->filtering);
  EXPECT_TRUE(o->waits);
  EXPECT_EQ(o->carry_path, "/w/exec-carry.7");
  EXPECT_EQ(o->args.size(), 11u);
  EXPECT_EQ(o->args.back(), "waits=1");
  for (const std::string& a : o->args) EXPECT_NE(a.rfind("exec=", 0), 0u) << a;
}

TEST(PluginOptions, DefaultsAreSnapshotModeWithReturnCompressionAndJitCapture) {
  auto o = Parse({"out=/w"});
  ASSERT_TRUE(o);
  EXPECT_FALSE(o->full);
  EXPECT_EQ(o->psb_period, 4096u);
  EXPECT_TRUE(o->retcomp);
  EXPECT_TRUE(o->jit);
  EXPECT_FALSE(o->null);
  EXPECT_EQ(o->ctl_fd, -1);
}

// A bad argument is named (QEMU then refuses to load the plugin).
TEST(PluginOptions, ABadArgumentIsNamed) {
  for (const char* bad : {"psb=100", "psb=0x200000", "mtc_freq=16", "only_in=0", "trigger=zz",
                          "filter=nonsense", "colour=blue"}) {
    auto o = Parse({"out=/w", bad});
    ASSERT_FALSE(o) << bad;
    EXPECT_EQ(o.error().message(), std::string("bad plugin argument '") + bad + "'");
  }
  auto o = Parse({"mode=full"});
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message(), "the plugin needs out=DIR");
}

}  // namespace
}  // namespace ptsnap::emulate
