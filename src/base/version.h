// ptsnap's version, from meson.build's project() (the only place it is
// written): shown by --version and recorded in every manifest.
#pragma once

namespace ptsnap::base {

#ifndef PTSNAP_VERSION
#error "PTSNAP_VERSION comes from meson.build (add_project_arguments)"
#endif
inline constexpr const char* kVersion = PTSNAP_VERSION;

}  // namespace ptsnap::base
