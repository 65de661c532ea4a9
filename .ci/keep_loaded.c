/* Preloaded into the sanitizer build's tests by .ci/run: dlclose does
 * nothing, so libraries the Vulkan loader opened (drivers, the validation
 * layer) stay mapped until LeakSanitizer reports at exit and their frames
 * can be named and suppressed (.ci/lsan.supp). Never used outside CI. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
