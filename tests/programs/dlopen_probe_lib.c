/* The library dlopen_sibling loads: nothing else maps it (a system library
 * such as libm may already be mapped, e.g. by the sanitizer runtime). */
int ptsnap_dlopen_probe(int x);
int ptsnap_dlopen_probe(int x) { return x + 1; }
