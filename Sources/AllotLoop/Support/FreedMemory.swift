#if canImport(Glibc)
    import Glibc
#endif

/// Returns the heap's free pages to the OS after a checkpoint (SPEC 13: RSS ≤ 256 MB at 10,000
/// tenants).
///
/// A checkpoint encodes the estimator state into tens of MB of transient buffers; once they are
/// freed, glibc keeps the pages of any that came from the heap (rather than their own mappings)
/// resident until a later free happens to cross the trim threshold at the top of the heap, and
/// never trims holes in the middle. `malloc_trim(0)` releases them now, when the loop knows a large
/// burst of allocation has just ended. Elsewhere than glibc this does nothing.
enum FreedMemory {
    #if canImport(Glibc)
        /// `int malloc_trim(size_t pad)` from glibc's <malloc.h>, which the Glibc module does not
        /// import.
        @_silgen_name("malloc_trim")
        private static func mallocTrim(_ pad: Int) -> Int32
    #endif

    static func returnToSystem() {
        #if canImport(Glibc)
            _ = mallocTrim(0)
        #endif
    }
}
