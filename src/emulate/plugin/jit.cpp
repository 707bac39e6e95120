// JIT code capture (docs/emulation.md, "JIT code"): which code runs from
// memory no file backs, its bytes at translation, and the jit-code.<pid>
// records written when such a block first runs.
#include <fcntl.h>

#include <string>
#include <utility>
#include <vector>

#include "base/file_util.h"
#include "emulate/plugin/plugin.h"
#include "trace/jit_code.h"

namespace ptsnap::emulate {

void Plugin::AddFileCode(uint64_t lo, uint64_t hi) {
  std::lock_guard lock(jit_mu_);
  file_code_.emplace_back(lo, hi);
}

// [lo, hi) no longer maps a file (munmap, an anonymous MAP_FIXED mmap).
void Plugin::RemoveFileCode(uint64_t lo, uint64_t hi) {
  std::lock_guard lock(jit_mu_);
  std::vector<std::pair<uint64_t, uint64_t>> kept;
  for (auto [a, b] : file_code_) {
    if (b <= lo || a >= hi) {
      kept.emplace_back(a, b);
      continue;
    }
    if (a < lo) kept.emplace_back(a, lo);
    if (b > hi) kept.emplace_back(hi, b);
  }
  file_code_ = std::move(kept);
}

bool Plugin::InFileCode(uint64_t addr) {
  std::lock_guard lock(jit_mu_);
  for (auto [a, b] : file_code_)
    if (addr >= a && addr < b) return true;
  return false;
}

// Block `tb` (with captured bytes pending) runs for the first time, on
// thread `t` at time `now`: its bytes are recorded unless an earlier
// translation recorded the same ones. Returns true when they rewrite
// captured code: the stream must mark the time there (OnTbExec).
bool Plugin::CaptureJit(const ThreadState* t, const TbInfo* tb, uint64_t now) {
  JitPending* jit = tb->jit;
  if (jit->done.exchange(true, std::memory_order_relaxed)) return false;
  std::lock_guard lock(jit_mu_);
  const JitShadow::Change change = shadow_.Update(tb->start, jit->code);
  if (change == JitShadow::Change::kSame) return false;
  if (!jit_fd_) {
    const std::string path = opts_.out + "/" + trace::JitCodeWorkName(pid_);
    jit_fd_ = OpenWorkFile(path, O_TRUNC | O_APPEND);
    if (!jit_fd_) return false;
    if (!base::WriteAll(jit_fd_.get(), trace::JitCodeHeader(), "JIT code"))
      Die("writing the JIT code file failed");
  }
  const bool replaces = change == JitShadow::Change::kReplaces;
  trace::JitCodeLoad load{
      .time = now,
      .addr = tb->start,
      .tid = U32(t->tid),
      .flags = replaces ? trace::kJitCodeReplaces : 0,
      .code = {reinterpret_cast<const char*>(jit->code.data()), jit->code.size()}};
  if (!base::WriteAll(jit_fd_.get(), trace::FormatJitCodeRecord(load), "JIT code"))
    Die("writing the JIT code file failed");
  jit_records_.fetch_add(1, std::memory_order_relaxed);
  jit_bytes_.fetch_add(jit->code.size(), std::memory_order_relaxed);
  return replaces;
}

// Block `info` of `tb` runs code from memory no file backs: its bytes,
// instruction by instruction (contiguous within a block), to capture when
// it first runs; null when they were captured already.
JitPending* Plugin::PendingJit(qemu_plugin_tb* tb, const TbInfo& info) {
  std::vector<uint8_t> code;
  uint64_t next = info.start;
  for (size_t i = 0; i < info.ninsn; ++i) {
    qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    if (qemu_plugin_insn_vaddr(insn) != next) break;
    const size_t size = qemu_plugin_insn_size(insn);
    const auto* bytes = static_cast<const uint8_t*>(qemu_plugin_insn_data(insn));
    code.insert(code.end(), bytes, bytes + size);
    next += size;
  }
  bool same = false;
  {
    std::lock_guard lock(jit_mu_);
    same = shadow_.Compare(info.start, code) == JitShadow::Change::kSame;
  }
  if (same || code.empty()) return nullptr;
  auto* jit = new JitPending;  // lives as long as the block
  jit->code = std::move(code);
  return jit;
}

}  // namespace ptsnap::emulate
