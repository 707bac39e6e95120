/* PTSNAP_API marks what libptsnap exports; everything else in the library is
 * hidden (the linker's version script, src/api/libptsnap.map, has the final
 * word). Usable from C and C++. */
#ifndef PTSNAP_EXPORT_H_
#define PTSNAP_EXPORT_H_

#define PTSNAP_API __attribute__((visibility("default")))

#endif /* PTSNAP_EXPORT_H_ */
