#include "record/kcore_copy.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <sys/stat.h>

#include <cstdlib>

#include "base/file_util.h"
#include "record/recorder.h"
#include "sys/kcore.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::record {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;

constexpr uint64_t kText = 0xffffffff81000000;
constexpr uint64_t kDirectMap = 0xffff888000000000;
constexpr uint64_t kModules = 0xffffffffc0000000;

struct Segment {
  uint64_t vaddr;
  std::string bytes;
};

// Writes an ELF64 ET_CORE with one PT_LOAD per segment, laid out by hand
// through libelf (ELF_F_LAYOUT), like /proc/kcore: no section headers needed
// by readers, contents at page-aligned offsets.
void WriteSyntheticCore(const std::filesystem::path& path, const std::vector<Segment>& segs) {
  ASSERT_NE(elf_version(EV_CURRENT), EV_NONE);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0400);
  ASSERT_GE(fd, 0);
  Elf* elf = elf_begin(fd, ELF_C_WRITE, nullptr);
  ASSERT_NE(elf, nullptr) << elf_errmsg(-1);
  elf_flagelf(elf, ELF_C_SET, ELF_F_LAYOUT);
  GElf_Ehdr eh{};
  ASSERT_NE(gelf_newehdr(elf, ELFCLASS64), nullptr);
  ASSERT_NE(gelf_getehdr(elf, &eh), nullptr);
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_CORE;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_shoff = 0;
  ASSERT_NE(gelf_update_ehdr(elf, &eh), 0);
  ASSERT_NE(gelf_newphdr(elf, segs.size()), nullptr);
  uint64_t offset = 0x1000;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < segs.size(); ++i) {
    // Contents go in sections so libelf writes them at our offsets.
    Elf_Scn* scn = elf_newscn(elf);
    Elf_Data* data = elf_newdata(scn);
    data->d_buf = const_cast<char*>(segs[i].bytes.data());
    data->d_size = segs[i].bytes.size();
    data->d_type = ELF_T_BYTE;
    data->d_align = 1;
    GElf_Shdr sh{};
    gelf_getshdr(scn, &sh);
    sh.sh_type = SHT_PROGBITS;
    sh.sh_offset = offset;
    sh.sh_size = segs[i].bytes.size();
    sh.sh_addralign = 1;
    gelf_update_shdr(scn, &sh);
    GElf_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = PF_R | PF_W | PF_X;
    ph.p_offset = offset;
    ph.p_vaddr = segs[i].vaddr;
    ph.p_filesz = ph.p_memsz = segs[i].bytes.size();
    ph.p_align = 0x1000;
    ASSERT_NE(gelf_update_phdr(elf, static_cast<int>(i), &ph), 0);
    offset += (segs[i].bytes.size() + 0xfff) & ~uint64_t{0xfff};
  }
  // Section headers after the data.
  ASSERT_NE(gelf_getehdr(elf, &eh), nullptr);
  eh.e_shoff = offset;
  ASSERT_NE(gelf_update_ehdr(elf, &eh), 0);
  ASSERT_GE(elf_update(elf, ELF_C_WRITE), 0) << elf_errmsg(-1);
  elf_end(elf);
  ::close(fd);
}

std::string Fill(char c, size_t n) { return std::string(n, c); }

struct FakeKernel {
  TempDir root;
  FakeKernel() {
    std::string text = Fill('T', 0x3000);
    text[0x10] = 'X';  // a marker at _stext + 0x10
    WriteSyntheticCore(
        root.Mkdir("proc") / "kcore",
        {{kText, text}, {kDirectMap, Fill('D', 0x2000)}, {kModules, Fill('M', 0x4000)}});
    root.Write("proc/kallsyms",
               "ffffffff81000000 T _text\n"
               "ffffffff81000000 T _stext\n"
               "ffffffff81000400 T do_syscall_64\n"
               "ffffffff81002100 T _etext\n"
               "ffff888000001000 D some_data\n"
               "0000000000035000 a fake_mod_cpu\t[fake_mod]\n"  // a per-CPU variable
               "ffffffffc0001000 t mod_init\t[fake_mod]\n"
               "ffffffffc0001800 t mod_exit\t[fake_mod]\n");
    root.Write("proc/modules", "fake_mod 16384 0 - Live 0xffffffffc0001000\n");
  }
};

TEST(KcoreCopy, CopiesOnlyTextAndModulesWithMode0600) {
  FakeKernel k;
  TempDir out;
  auto copy = CopyKcore(base::RootPath(k.root.path()), out.path() / "kcore");
  ASSERT_THAT(copy, HasValue());
  EXPECT_EQ(copy->kernel_start, kText);
  EXPECT_FALSE(copy->kallsyms_changed);
  for (const char* f : {"kallsyms", "modules", "kcore"}) {
    struct stat st {};
    ASSERT_EQ(::stat((out.path() / "kcore" / f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  auto copied = sys::KcoreFile::OpenPath((out.path() / "kcore" / "kcore").string());
  ASSERT_THAT(copied, HasValue());
  const auto& loads = copied->header().loads;
  ASSERT_EQ(loads.size(), 2u);
  // Text: _stext .. _etext rounded up to a page.
  EXPECT_EQ(loads[0].vaddr, kText);
  EXPECT_EQ(loads[0].filesz, 0x3000u);
  // Modules: first module symbol (page-aligned) .. last + one page.
  EXPECT_EQ(loads[1].vaddr, kModules + 0x1000);
  EXPECT_EQ(loads[1].filesz, 0x2000u);
  // No direct-map data.
  EXPECT_EQ(sys::FindLoadCovering(copied->header(), kDirectMap + 0x1000), nullptr);
  std::string bytes(0x20, '\0');
  ASSERT_THAT(copied->ReadAt(kText, std::as_writable_bytes(std::span(bytes.data(), bytes.size()))),
              HasValue());
  EXPECT_EQ(bytes[0], 'T');
  EXPECT_EQ(bytes[0x10], 'X');
  std::string mod(8, '\0');
  ASSERT_THAT(copied->ReadAt(kModules + 0x1800, std::as_writable_bytes(std::span(mod.data(), 8))),
              HasValue());
  EXPECT_EQ(mod, "MMMMMMMM");
  EXPECT_EQ(base::ReadFile(out.path() / "kcore" / "modules").value_or(""),
            "fake_mod 16384 0 - Live 0xffffffffc0001000\n");
}

TEST(KcoreCopy, MaskedKallsymsIsAnErrorSayingWhy) {
  FakeKernel k;
  k.root.Write("proc/kallsyms",
               "0000000000000000 T _text\n0000000000000000 T _stext\n0000000000000000 T _etext\n");
  TempDir out;
  EXPECT_THAT(CopyKcore(base::RootPath(k.root.path()), out.path() / "kcore"),
              HasErrorContaining("kptr_restrict"));
  EXPECT_FALSE(std::filesystem::exists(out.path() / "kcore" / "kcore"));
}

TEST(KcoreCopy, MissingKcoreIsAnError) {
  FakeKernel k;
  std::filesystem::remove(k.root.path() / "proc" / "kcore");
  TempDir out;
  EXPECT_THAT(CopyKcore(base::RootPath(k.root.path()), out.path() / "kcore"),
              HasErrorContaining("/proc/kcore"));
}

// Sampled recordings: the symbols alone, no /proc/kcore needed.
TEST(KcoreCopy, SymbolsAloneForSampledRecordings) {
  FakeKernel k;
  std::filesystem::remove(k.root.path() / "proc" / "kcore");
  TempDir out;
  auto start = CopyKernelSymbols(base::RootPath(k.root.path()), out.path() / "kcore");
  ASSERT_THAT(start, HasValue());
  EXPECT_EQ(*start, 0xffffffff81000000u);
  EXPECT_TRUE(std::filesystem::exists(out.path() / "kcore" / "kallsyms"));
  EXPECT_TRUE(std::filesystem::exists(out.path() / "kcore" / "modules"));
  EXPECT_FALSE(std::filesystem::exists(out.path() / "kcore" / "kcore"));
  k.root.Write("proc/kallsyms", "0000000000000000 T _text\n0000000000000000 T _stext\n");
  EXPECT_THAT(CopyKernelSymbols(base::RootPath(k.root.path()), out.path() / "k2"),
              HasErrorContaining("kptr_restrict"));
}

// /proc/modules' refcounts change all the time (perf dropped its modules
// compare for that): only a module that came, went, moved or changed size
// counts as a race.
TEST(KcoreCopy, ModulesRaceCheckIgnoresRefcounts) {
  const std::string before =
      "nf_tables 348160 12 nft_ct,nft_chain_nat, Live 0xffffffffc0a1d000\n"
      "kvm_intel 479232 0 - Live 0xffffffffc0900000 (OE)\n";
  const std::string refcounts =
      "nf_tables 348160 187 nft_ct,nft_chain_nat, Live 0xffffffffc0a1d000\n"
      "kvm_intel 479232 3 - Live 0xffffffffc0900000 (OE)\n";
  EXPECT_FALSE(ModulesChanged(before, refcounts));
  EXPECT_FALSE(ModulesChanged(before, before));
  const std::string loaded = before + "dummy 16384 0 - Loading 0xffffffffc0b00000\n";
  EXPECT_TRUE(ModulesChanged(before, loaded));
  const std::string moved =
      "nf_tables 348160 12 nft_ct,nft_chain_nat, Live 0xffffffffc0a2d000\n"
      "kvm_intel 479232 0 - Live 0xffffffffc0900000 (OE)\n";
  EXPECT_TRUE(ModulesChanged(before, moved));
  EXPECT_TRUE(ModulesChanged(before, "kvm_intel 479232 0 - Live 0xffffffffc0900000 (OE)\n"));
}

TEST(KcoreCopy, EnvironmentSwitches) {
  ::unsetenv("PTSNAP_NO_KCORE");
  ::unsetenv("MAGIC_TRACE_PERF_NO_KCORE");
  EXPECT_EQ(KcoreDisabledBy(), "");
  ::setenv("MAGIC_TRACE_PERF_NO_KCORE", "1", 1);
  EXPECT_EQ(KcoreDisabledBy(), "MAGIC_TRACE_PERF_NO_KCORE");
  ::setenv("PTSNAP_NO_KCORE", "1", 1);
  EXPECT_EQ(KcoreDisabledBy(), "PTSNAP_NO_KCORE");
  ::unsetenv("PTSNAP_NO_KCORE");
  ::unsetenv("MAGIC_TRACE_PERF_NO_KCORE");
}

// hw-path-review.md: the kcore copy ran after tracing was enabled; perf
// copies first. A source that checks, when the recording enables its
// events, that the kernel image is already in the trace directory.
class KcoreOrderSource final : public PtSource {
 public:
  explicit KcoreOrderSource(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Result<void> AddThread(pid_t, pid_t, bool) override { return Ok(); }
  Result<void> AddCpu(int) override { return Ok(); }
  Result<void> ArmTriggers(const std::vector<TriggerPoint>&) override { return Ok(); }
  Result<void> EnableAll() override {
    if (!enabled_once_) *copied_before_enable = std::filesystem::exists(dir_ / "kcore" / "kcore");
    enabled_once_ = true;
    return Ok();
  }
  Result<SidebandEvents> DrainSideband(trace::TraceWriter&) override { return SidebandEvents{}; }
  Result<void> DrainAux(trace::TraceWriter&) override { return Ok(); }
  Result<std::vector<TriggerHit>> PollTriggers() override { return std::vector<TriggerHit>{}; }
  Result<void> Snapshot(trace::TraceWriter&, uint32_t, bool) override { return Ok(); }
  Result<void> Finish(trace::TraceWriter&) override { return Ok(); }
  uint64_t Now() const override { return 1; }
  size_t traced_threads() const override { return 1; }
  bool HasThread(pid_t) const override { return true; }
  std::optional<trace::TimeConv> time_conv() const override { return std::nullopt; }

  bool* copied_before_enable = nullptr;

 private:
  std::filesystem::path dir_;
  bool enabled_once_ = false;
};

TEST(KcoreCopy, RecordingCopiesTheKernelBeforeEnablingTracing) {
  ::unsetenv("PTSNAP_NO_KCORE");
  ::unsetenv("MAGIC_TRACE_PERF_NO_KCORE");
  FakeKernel k;
  // What the probe's kcore gate reads besides the files: a kernel release
  // and a root user.
  k.root.Write("proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
  k.root.Write("proc/self/status", "Name:\tptsnap\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n");
  TempDir out;
  const auto dir = out.path() / "t";
  RecordOptions opts;
  opts.pids = {::getpid()};
  opts.duration = std::chrono::milliseconds(1);
  Prepared p;
  p.scope = trace::Scope::kUserKernel;
  bool copied_before_enable = false;
  Control control;
  auto r = Record(opts, p, dir, base::RootPath(k.root.path()), control, nullptr,
                  [&](const HardwareConfig&) -> Result<std::unique_ptr<PtSource>> {
                    auto src = std::make_unique<KcoreOrderSource>(dir);
                    src->copied_before_enable = &copied_before_enable;
                    return std::unique_ptr<PtSource>(std::move(src));
                  });
  ASSERT_THAT(r, HasValue());
  EXPECT_TRUE(copied_before_enable) << "tracing was enabled before the kernel image was copied";
  EXPECT_TRUE(std::filesystem::exists(dir / "kcore" / "kcore"));
}

}  // namespace
}  // namespace ptsnap::record
