#include "decode/fp_mend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "elf/symbol_file.h"

namespace ptsnap::decode {

FpMend MendFpChain(const Sample& s, const std::optional<elf::FrameRule>& rule,
                   std::vector<StackFrame>* frames, size_t max_depth, uint64_t* inserted) {
  constexpr uint64_t kIpSp = (1ull << kPerfRegIp) | (1ull << kPerfRegSp);
  if (s.regs_abi == PERF_SAMPLE_REGS_ABI_NONE || (s.regs_mask & kIpSp) != kIpSp) {
    // Without user registers there is no user IP to find either: a kernel
    // thread has none (abi NONE), a user sample always does.
    bool user = std::any_of(frames->begin(), frames->end(),
                            [](const StackFrame& f) { return !IsKernelAddress(f.address); });
    return user ? FpMend::kNoStack : FpMend::kNoUser;
  }
  const uint64_t ip = s.regs[kPerfRegIp];
  auto at = std::find_if(frames->begin(), frames->end(),
                         [ip](const StackFrame& f) { return f.address == ip && !f.is_return; });
  if (at == frames->end()) return FpMend::kNoUser;
  if (!rule || !rule->cfa_known) return FpMend::kNoRule;
  // The outermost frame (_start, a thread's entry): no caller to miss.
  if (rule->ra == elf::FrameRule::Ra::kUndefined) return FpMend::kRight;
  if (rule->cfa_reg == elf::kDwarfRbp) return FpMend::kRight;
  if (rule->cfa_reg != elf::kDwarfRsp || rule->ra != elf::FrameRule::Ra::kSaved)
    return FpMend::kNoRule;
  // The stack copy starts at the user %rsp (PERF_SAMPLE_STACK_USER);
  // dyn_size bytes of it are valid.
  const uint64_t valid = std::min<uint64_t>(s.stack_dyn_size, s.stack.size());
  const uint64_t from_sp =
      static_cast<uint64_t>(rule->cfa_offset) + static_cast<uint64_t>(rule->ra_offset);
  if (from_sp > valid || valid - from_sp < 8) return FpMend::kNoStack;
  uint64_t ret = 0;
  std::memcpy(&ret, s.stack.data() + from_sp, sizeof ret);
  // Zero or a kernel address is no user return address: the CFI does not
  // describe what the stack holds.
  if (ret == 0 || IsKernelAddress(ret)) return FpMend::kNoStack;
  frames->insert(at + 1, StackFrame{ret, true});
  if (frames->size() > max_depth) frames->pop_back();
  if (inserted != nullptr) *inserted = ret;
  return FpMend::kMended;
}

FpChainMender::FpChainMender(MappingsFn mappings, Symbolizer* symbolizer)
    : mappings_(std::move(mappings)), symbolizer_(symbolizer) {}

std::optional<elf::FrameRule> FpChainMender::RuleAt(int32_t space, uint64_t ip) {
  auto sit = spaces_.find(space);
  if (sit == spaces_.end()) {
    std::vector<CodeMapping> maps = mappings_(space);
    std::sort(maps.begin(), maps.end(),
              [](const CodeMapping& a, const CodeMapping& b) { return a.start < b.start; });
    sit = spaces_.emplace(space, std::move(maps)).first;
  }
  const std::vector<CodeMapping>& maps = sit->second;
  auto m = std::upper_bound(maps.begin(), maps.end(), ip,
                            [](uint64_t v, const CodeMapping& c) { return v < c.start; });
  if (m == maps.begin()) return std::nullopt;
  --m;
  if (ip >= m->end) return std::nullopt;
  const elf::SymbolFile* elf = symbolizer_->LoadElf(m->file);
  if (elf == nullptr) return std::nullopt;
  const std::optional<uint64_t> vaddr = elf->OffsetToVaddr(ip - m->start + m->pgoff);
  if (!vaddr) return std::nullopt;
  auto tit = tables_.find(m->file);
  if (tit == tables_.end()) {
    Result<elf::CfaTable> table = elf::ReadCfaTable(m->file);
    tit = tables_.emplace(m->file, table ? std::move(*table) : elf::CfaTable()).first;
  }
  return tit->second.Find(*vaddr);
}

FpMend FpChainMender::Mend(int32_t space, const Sample& s, std::vector<StackFrame>* frames,
                           size_t max_depth) {
  std::optional<elf::FrameRule> rule;
  constexpr uint64_t kIp = 1ull << kPerfRegIp;
  if (s.regs_abi != PERF_SAMPLE_REGS_ABI_NONE && (s.regs_mask & kIp) != 0)
    rule = RuleAt(space, s.regs[kPerfRegIp]);
  uint64_t caller = 0;
  const FpMend m = MendFpChain(s, rule, frames, max_depth, &caller);
  if (m != FpMend::kMended) return m;
  // The call instruction ends just before the return address.
  const std::optional<elf::FrameRule> at_call = RuleAt(space, caller - 1);
  if (at_call && at_call->cfa_known && at_call->cfa_reg == elf::kDwarfRsp)
    return FpMend::kMendedCallerHasNoFrame;
  return m;
}

}  // namespace ptsnap::decode
