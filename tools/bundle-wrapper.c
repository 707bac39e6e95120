// bin/ptsnap of the bundle (tools/make-bundle): runs the real binary under
// the bundle's own dynamic loader and libraries, so the host's never mix in,
//   ROOT/lib/ld-linux-x86-64.so.2 --inhibit-cache --library-path ROOT/lib
//       [--argv0 ptsnap] ROOT/libexec/ptsnap ARGS...
// where ROOT is the directory above the one holding this program. Built with
// gcc -static: it must run where nothing else exists (no /bin/sh, no libc).
// PTSNAP_QEMU_PLUGIN names the bundled emulator plugin unless already set
// (under the loader, /proc/self/exe is ld.so, so ptsnap cannot find it there).
// PTSNAP_HAVE_ARGV0 is defined when the bundled loader has --argv0 (2.33+).
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Drops the last path component of `path` in place; 0 when there is none.
static int StripLast(char* path) {
  char* slash = strrchr(path, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  return 1;
}

// out = root + suffix, or exits when it does not fit.
static void Join(char* out, const char* root, const char* suffix) {
  if (snprintf(out, PATH_MAX, "%s%s", root, suffix) >= PATH_MAX) {
    fprintf(stderr, "ptsnap: bundle path too long: %s%s\n", root, suffix);
    exit(127);
  }
}

int main(int argc, char** argv) {
  char root[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", root, sizeof root - 1);
  if (n < 0) {
    fprintf(stderr, "ptsnap: cannot find the bundle: readlink /proc/self/exe: %s%s\n",
            strerror(errno), errno == ENOENT ? " (is /proc mounted?)" : "");
    return 127;
  }
  root[n] = '\0';
  if (!StripLast(root) || !StripLast(root)) {  // ROOT/bin/ptsnap -> ROOT
    fprintf(stderr, "ptsnap: this program must be ROOT/bin/ptsnap of the bundle, not %s\n", root);
    return 127;
  }
  char loader[PATH_MAX], lib[PATH_MAX], exe[PATH_MAX], plugin[PATH_MAX];
  Join(loader, root, "/lib/ld-linux-x86-64.so.2");
  Join(lib, root, "/lib");
  Join(exe, root, "/libexec/ptsnap");
  Join(plugin, root, "/lib/ptsnap/libptsnap_qemu.so");
  if (setenv("PTSNAP_QEMU_PLUGIN", plugin, 0) != 0) {
    perror("ptsnap: setenv");
    return 127;
  }

  char** args = calloc((size_t)argc + 8, sizeof *args);
  if (args == NULL) return 127;
  int i = 0;
  args[i++] = loader;
  args[i++] = "--inhibit-cache";  // never the host's /etc/ld.so.cache
  args[i++] = "--library-path";
  args[i++] = lib;
#ifdef PTSNAP_HAVE_ARGV0
  args[i++] = "--argv0";
  args[i++] = argc > 0 ? argv[0] : "ptsnap";
#endif
  args[i++] = exe;
  for (int a = 1; a < argc; ++a) args[i++] = argv[a];
  args[i] = NULL;
  execv(loader, args);
  fprintf(stderr, "ptsnap: cannot run the bundled loader %s: %s\n", loader, strerror(errno));
  return 127;
}
