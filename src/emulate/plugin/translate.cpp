// Translation: each block's exit classified once (exit_class.h), with its
// trigger, filter and JIT flags, for the exec callback (tb_exec.cpp).
#include "emulate/plugin/plugin.h"

namespace ptsnap::emulate {

void Plugin::OnTbTrans(qemu_plugin_tb* tb) {
  if (detached_.load(std::memory_order_relaxed)) return;  // nothing is recorded any more
  if (!images_done_.load(std::memory_order_relaxed)) DescribeImages();
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (n == 0) return;
  auto* info = new TbInfo;  // lives as long as QEMU may run the block
  info->start = qemu_plugin_tb_vaddr(tb);
  info->ninsn = static_cast<uint32_t>(n);
  qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
  uint64_t last_ip = qemu_plugin_insn_vaddr(last);
  size_t last_size = qemu_plugin_insn_size(last);
  auto* data = static_cast<const uint8_t*>(qemu_plugin_insn_data(last));
  auto exit = ClassifyInstruction({data, last_size}, last_ip);
  if (!exit) {
    // The abandoned page-crossing instruction of a page-split block: it does
    // not execute here; the block falls through to it.
    info->ninsn = static_cast<uint32_t>(n - 1);
    info->kind = ExitKind::kNone;
    info->last_ip = last_ip;
    info->fallthrough = last_ip;
  } else {
    info->kind = exit->kind;
    info->target = exit->target;
    info->fallthrough = exit->fallthrough;
    info->pushes = exit->pushes;
    info->last_ip = last_ip;
  }
  if (opts_.hash) {
    for (size_t i = 0; i < info->ninsn; ++i)
      info->ips.push_back(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i)));
  }
  {
    std::lock_guard lock(range_mu_);
    for (uint64_t a : trigger_rt_)
      if (a == info->start) info->flags |= kFlagTrigger;
  }
  for (uint64_t a : stop_rt_)
    if (a == info->start) info->flags |= kFlagStop;
  if (slow_rt_ != 0 && slow_rt_ == info->start) info->flags |= kFlagSlow;
  if (only_in_rt_ != 0 && only_in_rt_ == info->start) info->flags |= kFlagOnlyIn;
  info->flags |= FilterFlags(info->start);
  if (opts_.jit && info->ninsn > 0 && (info->start >> 63) == 0 && !InFileCode(info->start))
    info->jit = PendingJit(tb, *info);
  if (info->ninsn == 0) {
    delete info;
    return;
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, OnTbExecCallback, QEMU_PLUGIN_CB_NO_REGS, info);
}

}  // namespace ptsnap::emulate
