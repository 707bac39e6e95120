// The subset of QEMU's TCG plugin API (include/qemu/qemu-plugin.h, plugin API
// version 1 as shipped by QEMU 7.x) that ptsnap's plugin uses. Debian's
// qemu-user package does not ship the header, so the declarations are copied
// here from the documented public API. The symbols are resolved at load time
// against the qemu-x86_64 binary. A QEMU whose API version differs is refused
// in qemu_plugin_install (see plugin.cpp): layouts below are only known to
// hold for version 1.
#pragma once

#include <cstddef>
#include <cstdint>

// QEMU's names, as its header spells them.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

#define PTSNAP_QEMU_PLUGIN_API_VERSION 1

typedef uint64_t qemu_plugin_id_t;

// Passed to qemu_plugin_install. `version.cur` is the API version QEMU
// implements, `version.min` the oldest plugin version it still loads.
struct qemu_info_version {
  int min;
  int cur;
};
struct qemu_info_system {
  int smp_vcpus;
  int max_vcpus;
};
typedef struct qemu_info_t {
  const char* target_name;
  qemu_info_version version;
  bool system_emulation;
  union {
    qemu_info_system system;
  };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
  QEMU_PLUGIN_CB_NO_REGS,
  QEMU_PLUGIN_CB_R_REGS,
  QEMU_PLUGIN_CB_RW_REGS,
};

typedef void (*qemu_plugin_simple_cb_t)(qemu_plugin_id_t id);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void* userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index,
                                              int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                                              uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7,
                                              uint64_t a8);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_idx,
                                                  int64_t num, int64_t ret);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_exit_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb* tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void* userdata);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t id,
                                              qemu_plugin_vcpu_syscall_ret_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);
// Unregisters every callback of the plugin (it stays loaded) and flushes
// the translated code, so no block calls it again; `cb` runs when that is
// done. From a vCPU thread the flush is scheduled as safe work.
void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
// Version 1: a pointer to the translator's copy of the bytes (valid during
// the tb_trans callback only).
const void* qemu_plugin_insn_data(const struct qemu_plugin_insn* insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn* insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);

// Valid after the guest is loaded (not inside qemu_plugin_install).
const char* qemu_plugin_path_to_binary(void);
uint64_t qemu_plugin_start_code(void);
uint64_t qemu_plugin_end_code(void);
uint64_t qemu_plugin_entry_code(void);
}  // extern "C"
// NOLINTEND(readability-identifier-naming)
