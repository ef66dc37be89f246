#if canImport(Glibc)
    import Glibc
#endif

/// Keeps the process's resident memory close to what it actually uses (SPEC 13: RSS ≤ 256 MB at
/// 10,000 tenants).
///
/// glibc raises its mmap threshold dynamically up to 32 MiB each time a large mmapped block is
/// freed, so after the first checkpoint (tens of MB of encoded estimator state) and the first
/// catch-up ticks, every later large buffer comes from the heap, and freed heap memory at the
/// top is only returned above a 128 KiB trim threshold that also scales up. Fixing both
/// thresholds at 128 KiB (glibc's initial value) keeps large transient buffers in their own
/// mappings, returned to the OS on free. Measured with `allot bench memory`; see README
/// "Benchmarks". `MALLOC_MMAP_THRESHOLD_`/`MALLOC_TRIM_THRESHOLD_` in the environment win.
enum MallocTuning {
    /// `int mallopt(int param, int value)` from glibc's <malloc.h>, which the Glibc module does not
    /// import.
    @_silgen_name("mallopt")
    private static func mallopt(_ parameter: Int32, _ value: Int32) -> Int32

    static func apply(environment: [String: String]) {
        #if canImport(Glibc)
            let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD in <malloc.h>
            let trimThreshold: Int32 = -1  // M_TRIM_THRESHOLD
            let bytes: Int32 = 128 * 1024
            if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = mallopt(mmapThreshold, bytes) }
            if environment["MALLOC_TRIM_THRESHOLD_"] == nil { _ = mallopt(trimThreshold, bytes) }
        #endif
    }
}
