// `Double.rounded(_:)` lowers to libm's `floor` and `round` on Linux. Importing Glibc makes this
// module link libm itself, so AllotCore links into binaries that do not import Foundation.
#if canImport(Glibc)
    import Glibc
#endif
